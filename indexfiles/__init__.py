"""Ledger index ``.idx`` files: the hierarchy walk (scan.py), its parts and their twins, and the writer.

listing.py lists a hierarchy once; reading.py reads the files (holes of sparse files skipped);
decode.py holds the jitted kernels; reader.py and arrays.py are the pure-Python twins tests compare
them with; writer.py writes index files.
"""
