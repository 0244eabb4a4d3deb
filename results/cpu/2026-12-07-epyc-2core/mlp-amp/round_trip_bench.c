/* cpu_round_trip (fp32 -> fp16 -> fp32 in place, with the finite check: gemm_fold's epilogue) and
 * cpu_widen on one thread, over n values that stay in the caches: ns a value, and TSC cycles per 16
 * values (the TSC runs at 2.6 GHz here). usage: round_trip_bench */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>
#include "backend.h"
#include "runtime_cpu.h"
#include "half.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
int main(){ for(int n=4096;n<=(1<<17);n*=4){ float*a=aligned_alloc(64,n*4); for(int i=0;i<n;i++)a[i]=(rand()%2000-1000)/1000.f;
 int it=(1<<24)/n; double t0=now(); for(int q=0;q<it;q++) cpu_round_trip(n,AB_F16,a,a,0); double t=now()-t0;
 double t1=now(); for(int q=0;q<it;q++) cpu_widen(n/2,AB_F16,(uint16_t*)a,a+n/2); double tw=now()-t1;
 unsigned long long c0=__rdtsc(); for(int q=0;q<it;q++) cpu_round_trip(n,AB_F16,a,a,0); unsigned long long c=__rdtsc()-c0;
 printf("n %6d: rt %.3f ns/value (%.2f tsc cycles per 16)  widen %.3f ns/value\n",n,t/it/n*1e9,(double)c/it/n*16,tw/it/(n/2)*1e9);}}
