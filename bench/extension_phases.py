"""The extension scan's parts inside one snapshot (warm cache: the env's own cache dir): module
owners (RECORD / conda-meta lookups), the directory walks, and loading the directory cache.
    PYTHONPATH=<dir holding cudafix/> <env>/bin/python bench/extension_phases.py
Used for docs/gpu-raw/h200-status-phases-2329.txt (docs/benchmarks.md, issue 23)."""
import time, sys, os
from cudafix.probes.pyenv import extensions as E, dirwalk as D, extowners
from cudafix.probes import take_snapshot
from cudafix.store import paths
ot=[0]; wt=[0]; ct=[0]
oo=extowners.Owners.owner
def owner(self,*a):
    t=time.perf_counter(); r=oo(self,*a); ot[0]+=time.perf_counter()-t; return r
extowners.Owners.owner=owner
ow=D.walk
def walk(*a):
    t=time.perf_counter(); r=list(ow(*a)); wt[0]+=time.perf_counter()-t; return iter(r)
E.walk=walk
oc=D.DirCache.__init__
def init(self,*a):
    t=time.perf_counter(); oc(self,*a); ct[0]+=time.perf_counter()-t
D.DirCache.__init__=init
pe=E.probe_extensions; et=[0]
def probe(*a, **k):
    t=time.perf_counter(); r=pe(*a, **k); et[0]+=time.perf_counter()-t; return r
import cudafix.probes as P
P.probe_extensions = probe
t=time.perf_counter(); s=take_snapshot(cache_dir=paths.env_cache_dir(sys.prefix)); tot=time.perf_counter()-t
print('snapshot %.1f ext %.1f owner %.1f walk %.1f dircache-load %.1f ms'%(tot*1e3, et[0]*1e3, ot[0]*1e3, wt[0]*1e3, ct[0]*1e3), s.extensions.files_seen, len(s.extensions.modules))
