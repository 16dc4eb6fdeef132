"""What both graders share, the trusted one and the student's: an assignment and its contract, a
submission read and loaded cell by cell, the report and how it is assembled and scored, hints,
and the rules for text the student controls. Nothing here imports torch.
"""
