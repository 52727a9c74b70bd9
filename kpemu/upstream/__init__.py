"""Upstream Kubernetes binaries built from source by kpemu: kube-proxy per release, kube-apiserver and
etcd once (the newest release), into kpemu's cache (kpemu/upstream/store.py says where).

Pure: releases.py (release names, the oldest buildable), gomod.py (the wrapper module from a
release's go.mod, the version ldflags). I/O: gotool.py (the go commands), store.py (the cache and
manifests), build.py (what to build, reuse). Nothing of upstream is kept in kpemu's repository.
"""
