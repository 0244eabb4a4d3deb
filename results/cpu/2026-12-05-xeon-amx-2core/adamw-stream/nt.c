/* AdamW's pass alone, plain stores against non-temporal ones (2 OpenMP threads, each half the
 * array): the loop of kernel_math.h's ab_adamw_update as the compiler vectorizes it, and the same
 * operations in AVX-512 intrinsics storing m and v with _mm512_stream_ps, and w too unless the
 * second argument is "w-plain" (kernels/cpu/backend_cpu.c's adamw_range stores w plainly: in AMP
 * the working copy's refresh reads it right after). It checks the two give the same bits, then
 * prints 7 rounds at MiniLM's 22.7M parameters and 4 at BERT-base's 109.5M (nt.txt).
 *   gcc -O2 -ffp-contract=off -fno-trapping-math -fopenmp nt.c -o nt -lm
 *   ./nt 22700000; ./nt 22700000 w-plain; ./nt 109482240; ./nt 109482240 w-plain */
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static int wplain;
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define ATTR __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl")))
ATTR static void plain(size_t lo, size_t hi, float *restrict w, const float *restrict g, float *restrict m, float *restrict v, float b1, float b2, float eps, float decay, float ss, float rb, float gs){
  for(size_t i=lo;i<hi;i++){ float gi=g[i]*gs; w[i]*=decay; m[i]=b1*m[i]+(1.0f-b1)*gi; v[i]=b2*v[i]+(1.0f-b2)*gi*gi; float d=sqrtf(v[i])*rb+eps; w[i]-=ss*m[i]/d; }
}
ATTR static void nt(size_t lo, size_t hi, float *restrict w, const float *restrict g, float *restrict m, float *restrict v, float b1, float b2, float eps, float decay, float ss, float rb, float gs){
  size_t i=lo;
  while(i<hi && ((size_t)(w+i)&63)) { plain(i,i+1,w,g,m,v,b1,b2,eps,decay,ss,rb,gs); i++; }
  const __m512 B1=_mm512_set1_ps(b1),B2=_mm512_set1_ps(b2),C1=_mm512_set1_ps(1.0f-b1),C2=_mm512_set1_ps(1.0f-b2),E=_mm512_set1_ps(eps),D=_mm512_set1_ps(decay),S=_mm512_set1_ps(ss),R=_mm512_set1_ps(rb),G=_mm512_set1_ps(gs);
  for(;i+16<=hi;i+=16){
    __m512 gi=_mm512_mul_ps(_mm512_loadu_ps(g+i),G);
    __m512 wi=_mm512_mul_ps(_mm512_load_ps(w+i),D);
    __m512 mi=_mm512_add_ps(_mm512_mul_ps(B1,_mm512_load_ps(m+i)),_mm512_mul_ps(C1,gi));
    __m512 vi=_mm512_add_ps(_mm512_mul_ps(B2,_mm512_load_ps(v+i)),_mm512_mul_ps(_mm512_mul_ps(C2,gi),gi));
    __m512 d=_mm512_add_ps(_mm512_mul_ps(_mm512_sqrt_ps(vi),R),E);
    wi=_mm512_sub_ps(wi,_mm512_div_ps(_mm512_mul_ps(S,mi),d));
    if (wplain) _mm512_store_ps(w+i,wi); else _mm512_stream_ps(w+i,wi);_mm512_stream_ps(m+i,mi);_mm512_stream_ps(v+i,vi);
  }
  plain(i,hi,w,g,m,v,b1,b2,eps,decay,ss,rb,gs);
}
int main(int argc,char**argv){
  size_t n=argc>1?atol(argv[1]):22700000;
  wplain=argc>2&&!strcmp(argv[2],"w-plain");
  float *w=aligned_alloc(64,n*4),*g=aligned_alloc(64,n*4),*m=aligned_alloc(64,n*4),*v=aligned_alloc(64,n*4);
  float *w2=aligned_alloc(64,n*4),*m2=aligned_alloc(64,n*4),*v2=aligned_alloc(64,n*4);
  for(size_t i=0;i<n;i++){w[i]=w2[i]=0.01f*(i%97);g[i]=1e-4f*(i%89)-0.004f;m[i]=v[i]=m2[i]=v2[i]=0;}
  double tp[7],tn[7];
  for(int r=0;r<7;r++){
    double t0=now();
    #pragma omp parallel num_threads(2)
    { int t=omp_get_thread_num(); size_t lo=n*t/2, hi=n*(t+1)/2; plain(lo,hi,w,g,m,v,0.9f,0.999f,1e-8f,0.999f,1e-5f,1.0f/sqrtf(1-powf(0.999f,r+1)),1.0f); }
    tp[r]=now()-t0; t0=now();
    #pragma omp parallel num_threads(2)
    { int t=omp_get_thread_num(); size_t lo=n*t/2, hi=n*(t+1)/2; nt(lo,hi,w2,g,m2,v2,0.9f,0.999f,1e-8f,0.999f,1e-5f,1.0f/sqrtf(1-powf(0.999f,r+1)),1.0f); }
    tn[r]=now()-t0;
  }
  printf("same bits: %d\n", !memcmp(w,w2,n*4)&&!memcmp(m,m2,n*4)&&!memcmp(v,v2,n*4));
  for(int r=0;r<7;r++) printf("plain %.2f ms  nt %.2f ms\n",tp[r]*1e3,tn[r]*1e3);
}
