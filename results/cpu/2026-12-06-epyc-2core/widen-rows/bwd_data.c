/* The backward-data products of ResNet-50 with the 7x7 stem at 32 x 32 images, batch 32 (layer4's
 * at 1 x 1, cut by columns; layer3's at 2 x 2 and layer2's at 4 x 4, by rows): dx = dy @ w, NN,
 * through the CPU backend's gemm op on 2 threads, fp32 against fp16 operands (fp32 C), the filter cold
 * (12 copies in turn). Median of R rounds of the 12 copies, us a product.
 * Build from the repository root against a build's library (build-dev, or a clean build's folder):
 *   cc -O2 -march=native -Icore -Ikernels/cpu results/cpu/2026-12-06-epyc-2core/widen-rows/bwd_data.c \
 *      BUILD/libabcpu.a BUILD/libabcore.a BUILD/libabplatform.a -ldnnl -lopenblas -lgomp -lm -lpthread */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "backend.h"
#include "backend_cpu.h"
#include "half.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
enum{COPIES=12};
int main(int argc,char**argv){
  ab_backend *be=ab_backend_cpu_create(2); int reps=argc>1?atoi(argv[1]):9;
  int sh[][3]={{32,4608,512},{32,2048,512},{32,512,2048},{128,2304,256},{128,1024,256},{128,256,1024},{512,1152,128}};
  double tot[2]={0,0};
  for(int s=0;s<7;s++){int M=sh[s][0],N=sh[s][1],K=sh[s][2];
    size_t na=(size_t)M*K,nb=(size_t)K*N,nc=(size_t)M*N;
    float*a=malloc(na*4),*c=malloc(nc*4); uint16_t*ah=malloc(na*2),*ch=malloc(nc*2);
    float*b[COPIES]; uint16_t*bh[COPIES];
    for(size_t i=0;i<na;i++){a[i]=(rand()%2000-1000)/1000.f;ah[i]=ab_f32_to_f16(a[i]);}
    for(int q=0;q<COPIES;q++){b[q]=malloc(nb*4);bh[q]=malloc(nb*2);for(size_t i=0;i<nb;i++){b[q][i]=(rand()%2000-1000)/1000.f;bh[q][i]=ab_f32_to_f16(b[q][i]);}}
    double med[2];
    for(int p=0;p<2;p++){double t[100];
      for(int r=0;r<reps;r++){double t0=now();for(int q=0;q<COPIES;q++){
        if(p==0) be->ops->gemm(be,0,0,M,N,K,1,AB_F32,a,K,AB_F32,b[q],N,NULL,AB_EPI_NONE,0,AB_F32,c,N);
        else be->ops->gemm(be,0,0,M,N,K,1,AB_F16,ah,K,AB_F16,bh[q],N,NULL,AB_EPI_NONE,0,AB_F32,c,N);}
        t[r]=(now()-t0)/COPIES;}
      qsort(t,reps,sizeof t[0],cmp); med[p]=t[reps/2]*1e6; tot[p]+=med[p];}
    printf("%4d x %4d x %4d NN  fp32 %8.1f us  fp16 %8.1f us  x%.3f\n",M,N,K,med[0],med[1],med[1]/med[0]);
    for(int q=0;q<COPIES;q++){free(b[q]);free(bh[q]);} free(a);free(c);free(ah);free(ch);
  }
  printf("total fp32 %.1f fp16 %.1f us\n",tot[0],tot[1]);
}
