"""What a step wrote, read as untrusted: the results channel and its readers.

Owns the bounded readers of files a step could write (`untrusted`), the JUnit
reader, the monitor's signed log and the evidence it kept, the twin's blob,
the results directory in the container (`volume`), and the harness's own
collectors that a step mounts (`collectors`). May import `engine`; never
`images`, `setup` or a harness kind.
"""
