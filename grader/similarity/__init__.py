"""Shared code across a class: which submissions share code with each other, or with sources the
instructor supplies (tutorials, last year's solutions). A similarity is evidence for a person
to read, never a verdict: nothing here changes a score, and nothing is sent anywhere.

Sources are read as text and tokenized (:mod:`tokenize`), never imported or run. Each is
reduced to normalised tokens (:mod:`grader.similarity.tokens`), fingerprinted by winnowing
(:mod:`grader.similarity.winnowing`), and the fingerprints are indexed so that only pairs that
share one are ever compared (:mod:`grader.similarity.compare`); the handout's own code is the
base, ignored everywhere (:mod:`grader.similarity.sources`). ``grade similarity`` and ``grade
batch --similarity`` write the result as ``similarity.json`` and a page
(:mod:`grader.views.similarity_page`).
"""
