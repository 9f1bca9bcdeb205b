import sys, warnings; sys.path.insert(0,'tests')
import torch
from tritonize.runtime import cuda_graphs as cg
from test_cuda_graphs import compiled, notes
orig_rec=cg.GraphRunner._record
def rec(self,key,args):
    print("RECORD", self.name, key, "existing", list(self.recordings), flush=True); return orig_rec(self,key,args)
cg.GraphRunner._record=rec
orig_prot=cg.Recording.protect_outputs
def prot(self):
    held=[(torch._C._storage_Use_Count(s._cdata), len([r for r in refs if r() is not None])) for s,refs in self.handed]
    r=orig_prot(self); print("PROTECT order", self.order, held, r, flush=True); return r
cg.Recording.protect_outputs=prot
def fn(x): return torch.softmax(x * 3, dim=-1) + 1
r=[]
f=compiled(fn,'cuda',r,dynamic=True,cudagraph_sizes=2)
for n in (3,5,7,3,5,7,3,5,7):
    x=torch.randn(n,6,device='cuda'); print("CALL", n, flush=True)
    torch.testing.assert_close(f(x), fn(x))
print(notes(r))
