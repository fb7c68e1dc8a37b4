import torch,sys
shapes={"llama":(8192,4096,12288),"vitl_out":(6304,1024,1024),"vitl_down":(197,4096,1024),"bert_out":(16384,768,768)}
for name,(m,k,n) in shapes.items():
    a=torch.randn(m,k,device="cuda",dtype=torch.float16); w=torch.randn(k,n,device="cuda",dtype=torch.float16)
    for _ in range(3): c=a@w
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_push(name); c=a@w; torch.cuda.synchronize(); torch.cuda.nvtx.range_pop()
