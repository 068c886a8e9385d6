"""An index, its input and its answer cache on object storage (`s3://bucket/prefix`), served through a local
working copy that is a cache of the remote, the remote being the source of truth: `uris` (what a location is,
and where its working copy lives), `s3` (the objects: list, get, put, conditional put, delete), `mirror` (a
folder kept equal to a prefix, file by file, by digest) and `lease` (the run lock: an object created and
renewed by conditional writes, which expires when its holder dies). The rest of the package works on local
paths; the runner and the readers pull and push through these modules (pipeline/mirroring.py)."""
