"""Harness images: content-addressed, built here when no registry answers.

Owns the recipe hash and build of a harness image (`build`), the root
filesystems built from Debian's packages or the host's runtime (`rootfs`), and
the service images that stand in for a registry's (`services`). May import
`engine`; never `results`, `setup` or a harness kind.
"""
