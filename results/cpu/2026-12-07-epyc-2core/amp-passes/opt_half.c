/* The optimizer pass with and without an fp16 working copy: SGD with momentum over ResNet-50's
 * 23,520,842 weights, AdamW over MiniLM's 22,713,602; 2 threads, the CPU backend as linked.
 * Prints the median of R passes of each (ms). */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "backend.h"
#include "backend_cpu.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(const double*)a,y=*(const double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  ab_backend*be=ab_backend_cpu_create(2); const ab_backend_ops*o=be->ops; int reps=argc>1?atoi(argv[1]):11;
  size_t n=23520842; float*w=aligned_alloc(64,n*4+64),*g=aligned_alloc(64,n*4+64),*m=aligned_alloc(64,n*4+64),*v=aligned_alloc(64,n*4+64); uint16_t*wc=aligned_alloc(64,n*2+64);
  for(size_t i=0;i<n;i++){w[i]=(rand()%2000-1000)/3e4f;g[i]=(rand()%2000-1000)/3e6f;m[i]=0;v[i]=0;}
  const char*nm[4]={"sgd_fp32","sgd_fp16copy","adamw_fp32","adamw_fp16copy"};
  for(int k=0;k<4;k++){double t[201];for(int r=0;r<reps;r++){double t0=now();
     switch(k){case 0:o->sgd_step(be,n,w,g,m,0.1f,0.9f,1e-4f,0,1.0f,AB_F32,NULL);break;
       case 1:o->sgd_step(be,n,w,g,m,0.1f,0.9f,1e-4f,0,1.0f/1024,AB_F16,wc);break;
       case 2:o->adamw_step(be,22713602,w,g,m,v,2e-5f,0.9f,0.999f,1e-8f,0.01f,r+1,1.0f,AB_F32,NULL);break;
       case 3:o->adamw_step(be,22713602,w,g,m,v,2e-5f,0.9f,0.999f,1e-8f,0.01f,r+1,1.0f/1024,AB_F16,wc);break;}
     t[r]=now()-t0;}
   qsort(t,reps,8,cmp);printf("%s %.3f\n",nm[k],t[reps/2]*1e3);}
  be->ops->destroy(be); return 0;
}
