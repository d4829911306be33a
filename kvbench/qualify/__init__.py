"""Drive qualification: profiles (``profile``), preconditioning to SNIA PTS steady state (``precondition``),
workloads as kvbench command steps (``steps``), criteria (``criteria``) and the job itself (``job``).
"""
