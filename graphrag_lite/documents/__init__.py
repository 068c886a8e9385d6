"""The input folder as documents: file formats (formats.py), the folder read into documents with each file
read once per command (reading.py), and what changed since the last run (changes.py)."""
