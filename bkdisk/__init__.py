"""The ``bkdisk`` command line: dumps, inventory, fsck and the demo, over the library packages."""
