#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
enum{K=4096,N=4096};
float *W,*x,*y;
// (a) register blocks of NRV vectors walking all k (the micro-kernel's order)
static void blocks(int nrv){
  #pragma omp parallel for schedule(static)
  for(int n0=0;n0<N;n0+=16*nrv){
    __m512 acc[16]; for(int j=0;j<nrv;j++)acc[j]=_mm512_setzero_ps();
    for(int k=0;k<K;k++){__m512 a=_mm512_set1_ps(x[k]); const float*w=W+(size_t)k*N+n0;
      for(int j=0;j<nrv;j++)acc[j]=_mm512_fmadd_ps(a,_mm512_loadu_ps(w+16*j),acc[j]);}
    for(int j=0;j<nrv;j++)_mm512_storeu_ps(y+n0+16*j,acc[j]);
  }
}
// (b) chunks of C columns, accumulators in an L1 array, rows walked whole within the chunk
static void chunks(int C){
  #pragma omp parallel for schedule(static)
  for(int n0=0;n0<N;n0+=C){
    float acc[8192] __attribute__((aligned(64))); memset(acc,0,C*4);
    for(int k=0;k<K;k++){__m512 a=_mm512_set1_ps(x[k]); const float*w=W+(size_t)k*N+n0;
      for(int v=0;v<C;v+=16)_mm512_store_ps(acc+v,_mm512_fmadd_ps(a,_mm512_loadu_ps(w+v),_mm512_load_ps(acc+v)));}
    memcpy(y+n0,acc,C*4);
  }
}
int main(){W=aligned_alloc(64,(size_t)K*N*4);x=aligned_alloc(64,K*4);y=aligned_alloc(64,N*4);
 for(size_t i=0;i<(size_t)K*N;i++)W[i]=(i%7)*0.1f; for(int i=0;i<K;i++)x[i]=1;
 const char*names[]={"blocks16","blocks8","chunks512","chunks1024","chunks2048"};
 double best[5]={1e9,1e9,1e9,1e9,1e9};
 for(int r=0;r<20;r++)for(int v=0;v<5;v++){double t=now();
   if(v==0)blocks(16); else if(v==1)blocks(8); else chunks(v==2?512:v==3?1024:2048);
   t=now()-t; if(t<best[v])best[v]=t;}
 for(int v=0;v<5;v++)printf("%-12s %.3f ms  %.1f GB/s\n",names[v],best[v]*1e3,(double)K*N*4/best[v]/1e9);
}
