// A hand-written probe, not part of Tessel: the suite's softmax (4096 x 1024 f32) in the three passes
// Tessel's kernel makes per task of 32 rows (max; exp, row sum and a stored copy; scale and
// non-temporal store), with and without prefetching the next task's rows from the exp loop.
// exp8 omits NaN and subnormal handling (timing only). Build and run (one thread):
//   gcc -O3 -march=native -fopenmp softmax_prefetch_probe.c -o probe -lm && OMP_NUM_THREADS=1 ./probe
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <omp.h>
#include <math.h>
#define R 4096
#define C 1024
#define T 32
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
float *x,*y; static float e[2][T*C];
static inline __m256 exp8(__m256 v){ // cephes-like, no special cases (experiment only)
  v=_mm256_max_ps(_mm256_min_ps(v,_mm256_set1_ps(88.f)),_mm256_set1_ps(-87.f));
  __m256 n=_mm256_round_ps(_mm256_mul_ps(v,_mm256_set1_ps(1.44269504f)),_MM_FROUND_TO_NEAREST_INT|_MM_FROUND_NO_EXC);
  __m256 r=_mm256_fnmadd_ps(n,_mm256_set1_ps(0.693359375f),v); r=_mm256_fnmadd_ps(n,_mm256_set1_ps(-2.12194440e-4f),r);
  __m256 p=_mm256_set1_ps(1.9875691500e-4f);
  p=_mm256_fmadd_ps(p,r,_mm256_set1_ps(1.3981999507e-3f));p=_mm256_fmadd_ps(p,r,_mm256_set1_ps(8.3334519073e-3f));
  p=_mm256_fmadd_ps(p,r,_mm256_set1_ps(4.1665795894e-2f));p=_mm256_fmadd_ps(p,r,_mm256_set1_ps(1.6666665459e-1f));
  p=_mm256_fmadd_ps(p,r,_mm256_set1_ps(5.0000001201e-1f));
  __m256 yv=_mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p,r),r,r),_mm256_set1_ps(1.f));
  __m256i ni=_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n),_mm256_set1_epi32(127)),23);
  return _mm256_mul_ps(yv,_mm256_castsi256_ps(ni));
}
void run(int pf){
#pragma omp parallel
 { int id=omp_get_thread_num(); float* eb=e[id];
#pragma omp for schedule(static)
 for(int t=0;t<R/T;t++){
  const float* xt=x+(size_t)t*T*C; const float* xn=xt+T*C; int havenext = (t+1)<R/T;
  float mx[T], sm[T];
  for(int i=0;i<T;i++){ __m256 m=_mm256_set1_ps(-INFINITY); for(int c=0;c<C;c+=8)m=_mm256_max_ps(m,_mm256_loadu_ps(xt+i*C+c)); float b[8];_mm256_storeu_ps(b,m);float q=b[0];for(int k=1;k<8;k++)q=q>b[k]?q:b[k];mx[i]=q;}
  for(int i=0;i<T;i++){ __m256 s0=_mm256_setzero_ps(),s1=s0; __m256 mv=_mm256_set1_ps(mx[i]);
    for(int c=0;c<C;c+=16){ if(pf&&havenext){ _mm_prefetch((const char*)(xn+i*C+c),_MM_HINT_T0);} __m256 a=exp8(_mm256_sub_ps(_mm256_loadu_ps(xt+i*C+c),mv)); __m256 bq=exp8(_mm256_sub_ps(_mm256_loadu_ps(xt+i*C+c+8),mv)); _mm256_storeu_ps(eb+i*C+c,a);_mm256_storeu_ps(eb+i*C+c+8,bq); s0=_mm256_add_ps(s0,a);s1=_mm256_add_ps(s1,bq);}
    float b[8];_mm256_storeu_ps(b,_mm256_add_ps(s0,s1));double q=0;for(int k=0;k<8;k++)q+=b[k];sm[i]=(float)q;}
  for(int i=0;i<T;i++){ __m256 rv=_mm256_set1_ps(1.f/sm[i]); for(int c=0;c<C;c+=8) _mm256_stream_ps(y+(size_t)t*T*C+i*C+c,_mm256_mul_ps(_mm256_loadu_ps(eb+i*C+c),rv)); }
 }}
 _mm_sfence();
}
int main(){ x=aligned_alloc(64,4ul*R*C);y=aligned_alloc(64,4ul*R*C); for(size_t i=0;i<(size_t)R*C;i++){x[i]=(float)(i%977)*0.003f;y[i]=0;}
 for(int round=0;round<3;round++) for(int pf=0;pf<2;pf++){ double ts[40]; for(int i=0;i<50;i++){double t0=now();run(pf);double d=now()-t0;if(i>=10)ts[i-10]=d;}
  for(int i=0;i<40;i++)for(int j=i+1;j<40;j++)if(ts[j]<ts[i]){double q=ts[i];ts[i]=ts[j];ts[j]=q;}
  printf("prefetch %d threads %d median %.3f ms min %.3f\n",pf,omp_get_max_threads(),ts[20]*1e3,ts[0]*1e3);}
}
