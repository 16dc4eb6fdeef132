"""What people read: the terminal table, each student's feedback page, the class report.
"""
