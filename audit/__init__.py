"""The cluster-wide disk audit (issue 9): per-disk rows, the Spark job, its reports."""
