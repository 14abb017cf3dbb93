"""GEMM kernel time without host overhead (CUDA graphs of 20 calls), BF16 and FP8 (per-tensor _scaled_mm), NVML SM clock 20 Hz.

Usage: python3 tools/gpu/gemm_graphs.py OUT [sweep|train]  (sweep: 23 shapes -> OUT/gemm_graphs.json; train: the
linear layers of the published FP8 training cells -> OUT/gemm_graphs_train.json)
"""
import json,sys,threading,time,torch,pynvml as N
N.nvmlInit();h=N.nvmlDeviceGetHandleByIndex(0);cl=[];go=[True]
def smp():
    while go[0]:cl.append((time.time(),N.nvmlDeviceGetClockInfo(h,N.NVML_CLOCK_SM),N.nvmlDeviceGetPowerUsage(h)));time.sleep(.05)
threading.Thread(target=smp,daemon=True).start()
SET=sys.argv[2] if len(sys.argv)>2 else "sweep"
if SET=="sweep":S=[(m,n,k) for m in (64,128,256,512,1024) for n,k in ((4096,4096),(2048,7168),(7168,2048),(8192,8192))]+[(d,d,d) for d in (2048,4096,8192)]
else:
  # "train": the FP8/BF16 GEMMs of the published H100 training cells (catalog/fp8_training.yaml): per linear
  # (out, in) at T tokens per GPU, forward (T,out,in), data gradient (T,in,out), weight gradient (out,in,T).
  L={"llama-3-8b tp1":((6144,4096),(4096,4096),(28672,4096),(4096,14336)),"llama-3-70b tp4":((2560,8192),(8192,2048),(14336,8192),(8192,7168))}
  TT={"llama-3-8b tp1":(4096,8192,16384),"llama-3-70b tp4":(4096,8192)}
  S=list(dict.fromkeys(s for key,ls in L.items() for t in TT[key] for o,i in ls for s in ((t,o,i),(t,i,o),(o,i,t))))
out=[];one=torch.ones((),device="cuda")
for m,n,k in S:
  a=torch.randn(m,k,device="cuda",dtype=torch.bfloat16);b=torch.randn(k,n,device="cuda",dtype=torch.bfloat16)
  a8=a.to(torch.float8_e4m3fn);b8=b.t().contiguous().to(torch.float8_e4m3fn).t()
  for dt,f in (("bf16",lambda:a@b),("fp8",lambda:torch._scaled_mm(a8,b8,scale_a=one,scale_b=one,out_dtype=torch.bfloat16))):
    s=torch.cuda.Stream();s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
      for _ in range(3):f()
    torch.cuda.current_stream().wait_stream(s);g=torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
      for _ in range(20):f()
    g.replay();torch.cuda.synchronize();dur=3.0 if m==n==k==8192 else (.5 if SET=="sweep" else .4);r=0;t0=time.time()
    while time.time()-t0<dur:
      g.replay();r+=1
      if r%10==0:torch.cuda.synchronize()
    torch.cuda.synchronize();t1=time.time();w=[(c,p) for t,c,p in cl if t0+.15<=t<=t1]
    ms=(t1-t0)/(20*r)*1e3;out.append(dict(dtype=dt,m=m,n=n,k=k,ms=round(ms,5),tflops=round(2*m*n*k/ms/1e9,1),mhz=round(sum(c for c,_ in w)/max(len(w),1)),w=round(sum(p for _,p in w)/max(len(w),1)/1e3),samples=len(w)))
    print(out[-1],flush=True)
go[0]=False;json.dump(out,open(sys.argv[1]+("/gemm_graphs.json" if SET=="sweep" else f"/gemm_graphs_{SET}.json"),"w"),indent=0)
