"""A bookie as a whole: finding its dirs, describing it, and writing complete test disks."""
