"""The cluster-wide disk audit: per-disk rows, the Spark job, its reports, and its command lines (cli.py,
spark_app.py) on the command-line layer."""
