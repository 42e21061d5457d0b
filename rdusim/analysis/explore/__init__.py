"""The mapping explorer: the analytical estimator, the search, and the export of the mappings it
finds (``rdusim explore``).
"""
