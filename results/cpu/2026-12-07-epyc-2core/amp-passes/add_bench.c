/* the element-wise add with its fused ReLU over n values, fp32 and fp16, 2 threads, the CPU backend as
 * linked: the median of R timings of 10 calls each (us a call), for sizes of ResNet-50's residual
 * blocks (65K to 524K values, 7x7 stem, batch 32) and one of 8M. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "backend.h"
#include "backend_cpu.h"
#include "half.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  ab_backend*be=ab_backend_cpu_create(2); const ab_backend_ops*o=be->ops; int reps=argc>1?atoi(argv[1]):21;
  size_t ns[]={65536,131072,262144,524288,8388608}; double tot[2]={0};
  for(int s=0;s<5;s++){size_t n=ns[s]; float*a=malloc(n*4),*b=malloc(n*4),*y=malloc(n*4); uint16_t*ah=malloc(n*2),*bh=malloc(n*2),*yh=malloc(n*2);
    for(size_t i=0;i<n;i++){a[i]=(rand()%2000-1000)/300.f;b[i]=(rand()%2000-1000)/300.f;ah[i]=ab_f32_to_f16(a[i]);bh[i]=ab_f32_to_f16(b[i]);}
    printf("n=%8zu",n);
    for(int p=0;p<2;p++){double t[101];for(int r=0;r<reps;r++){double t0=now();for(int q=0;q<10;q++) o->add(be,n,p?AB_F16:AB_F32,p?(void*)ah:a,p?(void*)bh:b,1,p?(void*)yh:y);t[r]=(now()-t0)/10;}
      qsort(t,reps,8,cmp);printf("  %s %8.1f us",p?"f16":"f32",t[reps/2]*1e6);tot[p]+=t[reps/2];}
    printf("\n");}
  printf("total f32 %.0f f16 %.0f us\n",tot[0]*1e6,tot[1]*1e6);}
