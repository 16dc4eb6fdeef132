"""A results folder as data: the reports of a class, who handed in what, the class statistics,
summary.json and the gradebooks (grades.csv, and the LMS's own CSV files).
"""
