/* The batch assembly (gather_images) of 64 MNIST-shaped samples (one channel, 28 x 28, no
 * augmentation) from 60,000 random images, fp32 and fp16 outputs, 2 threads: each figure the median
 * of 41 timings of 200 batches (us a batch), 3 rounds. usage: gather_bench */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "backend.h"
#include "backend_cpu.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){ ab_backend*be=ab_backend_cpu_create(2); int N=60000,D=784,B=64,reps=41;
 uint8_t*data=malloc((size_t)N*D),*lab=malloc(N); for(size_t i=0;i<(size_t)N*D;i++)data[i]=rand()&255; for(int i=0;i<N;i++)lab[i]=rand()%10;
 int32_t*idx=malloc(4*B*200),*lo=malloc(4*B); float*out=malloc(4*B*D);
 for(int i=0;i<B*200;i++) idx[i]=rand()%N;
 ab_image_layout L={1,28,28,0,{0.1307f},{0.3081f}};
 for(int r=0;r<3;r++) for(int p=0;p<2;p++){ double t[101]; for(int k=0;k<reps;k++){ double t0=now(); for(int q=0;q<200;q++) be->ops->gather_images(be,B,&L,NULL,data,lab,idx+q*B,p?AB_F16:AB_F32,out,lo); t[k]=(now()-t0)/200;}
  qsort(t,reps,8,cmp); printf("%s %.2f us  ",p?"f16":"f32",t[reps/2]*1e6);} printf("\n"); }
