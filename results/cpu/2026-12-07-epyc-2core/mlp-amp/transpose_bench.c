/* cpu_transpose of the MLP's W2 (10 x 256: rows under a multiple of 8) into 256 x 10 fp32, from
 * fp32 and from fp16, on one thread: the median of 41 timings of 1,000 (us each), 3 rounds.
 * usage: transpose_bench */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "backend.h"
#include "runtime_cpu.h"
#include "half.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(){ int R=10,C=256; float*s=malloc(4*R*C),*d=malloc(4*R*C); uint16_t*h=malloc(2*R*C); for(int i=0;i<R*C;i++){s[i]=(rand()%2000-1000)/1000.f;h[i]=ab_f32_to_f16(s[i]);}
 for(int r=0;r<3;r++){ for(int v=0;v<2;v++){ double t[41]; for(int k=0;k<41;k++){double t0=now(); for(int q=0;q<1000;q++) cpu_transpose(R,C,v?AB_F16:AB_F32,v?(void*)h:(void*)s,C,d,R); t[k]=(now()-t0)/1000;} qsort(t,41,8,cmp); printf("%s %.3f us  ",v?"f16":"f32",t[20]*1e6);} printf("\n");}}
