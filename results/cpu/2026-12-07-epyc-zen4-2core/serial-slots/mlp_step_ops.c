/* The MLP's training step (batch 64, 784-256-10, SGD without momentum) as the trainer issues its
 * ops, on 2 threads, fp32 and AMP (loss scale 1024, fp16 working copies written by the optimizer)
 * taking turns in blocks of 50 steps in one process (a block's first 10 steps and the first 200
 * steps left out: the other precision's buffers leave the caches), and with XVAR a third block:
 * AMP with the environment variable XVAR set (for a build that reads one). Random inputs and
 * labels. Prints each op's median time per precision (us) and the median step.
 * usage: mlp_step_ops [STEPS] [XVAR]
 * build: gcc -O2 -Icore -Ikernels/cpu -Iplatform mlp_step_ops.c build-dev/libabcpu.a
 *        build-dev/libabcore.a build-dev/libabplatform.a -ldnnl -lopenblas -lgomp -lm -lpthread */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <math.h>
#include "backend.h"
#include "backend_cpu.h"
#include "half.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
enum{B_=64,I=784,H=256,O=10,NOPS=12,NS=60000};
static const char*nm[NOPS]={"gather","fwd1","fwd2","xent","dW2","db2","dH","relu_b","dW1","db1","sgd","check"};
typedef struct { float *W1,*b1,*W2,*b2,*G1,*g1,*G2,*g2; void *W1c,*W2c,*b1c,*b2c,*X,*Hh,*L,*dH; float *b1m,*b2m; } st;
int main(int argc,char**argv){
  ab_backend *be=ab_backend_cpu_create(2); const ab_backend_ops*o=be->ops; int steps=argc>1?atoi(argv[1]):3000; const char*xv=argc>2?argv[2]:NULL;
  uint8_t *data=malloc((size_t)NS*I),*lab=malloc(NS); for(size_t i=0;i<(size_t)NS*I;i++) data[i]=rand()%256; for(int i=0;i<NS;i++) lab[i]=rand()%10;
  int32_t idx[B_],labels[B_],finf=0; float loss=0;
  st s[2];
  for(int m=0;m<2;m++){ int es=m?2:4; st*q=&s[m];
    q->W1=malloc(4*H*I);q->b1=calloc(H,4);q->W2=malloc(4*O*H);q->b2=calloc(O,4);q->G1=calloc(H*I,4);q->g1=calloc(H,4);q->G2=calloc(O*H,4);q->g2=calloc(O,4);
    for(int i=0;i<H*I;i++) q->W1[i]=(rand()%2000-1000)/30000.f; for(int i=0;i<O*H;i++) q->W2[i]=(rand()%2000-1000)/30000.f;
    q->X=malloc(es*B_*I);q->Hh=malloc(es*B_*H);q->L=malloc(es*B_*O);q->dH=malloc(es*B_*H);
    q->W1c=m?aligned_alloc(64,2*H*I):q->W1; q->W2c=m?malloc(2*O*H):q->W2; q->b1c=m?calloc(H,2):q->b1; q->b2c=m?calloc(O,2):q->b2;
    if(m){o->cast(be,H*I,AB_F32,q->W1,AB_F16,q->W1c);o->cast(be,O*H,AB_F32,q->W2,AB_F16,q->W2c);}
  }
  double *t=calloc((size_t)steps*NOPS,sizeof(double)); int nm3=xv?3:2;
  for(int it=0;it<steps;it++){ int mode=(it/50)%nm3, m=mode>0; st*q=&s[m]; ab_dtype T=m?AB_F16:AB_F32; float sc=m?1024.f:1.f;
    if(xv){ if(mode==2) setenv(xv,"1",1); else unsetenv(xv); }
    for(int b=0;b<B_;b++) idx[b]=rand()%NS;
    double *tt=t+(size_t)it*NOPS, t0=now(), t1;
#define OP(k,call) do{ call; t1=now(); tt[k]=t1-t0; t0=t1; }while(0)
    OP(0,o->gather_normalize(be,B_,I,data,lab,idx,0.1307f,0.3081f,T,q->X,labels));
    OP(1,o->gemm(be,0,1,B_,H,I,1,T,q->X,I,T,q->W1c,I,q->b1c,AB_EPI_RELU,0,T,q->Hh,H));
    OP(2,o->gemm(be,0,1,B_,O,H,1,T,q->Hh,H,T,q->W2c,H,q->b2c,AB_EPI_NONE,0,T,q->L,O));
    OP(3,o->softmax_xent(be,B_,O,T,q->L,labels,sc,T,q->L,&loss,NULL));
    OP(4,m?o->gemm_fold(be,1,0,O,H,B_,T,q->L,O,T,q->Hh,H,T,NULL,q->G2,0,&finf):o->gemm(be,1,0,O,H,B_,1,T,q->L,O,T,q->Hh,H,NULL,AB_EPI_NONE,0,T,q->G2,H));
    OP(5,o->col_sum(be,B_,O,T,q->L,0,AB_F32,q->g2));
    OP(6,o->gemm(be,0,0,B_,H,O,1,T,q->L,O,T,q->W2c,H,NULL,AB_EPI_NONE,0,T,q->dH,H));
    OP(7,o->relu_backward(be,(size_t)B_*H,T,q->Hh,q->dH,q->dH));
    OP(8,m?o->gemm_fold(be,1,0,H,I,B_,T,q->dH,H,T,q->X,I,T,NULL,q->G1,0,&finf):o->gemm(be,1,0,H,I,B_,1,T,q->dH,H,T,q->X,I,NULL,AB_EPI_NONE,0,T,q->G1,I));
    OP(9,o->col_sum(be,B_,H,T,q->dH,0,AB_F32,q->g1));
    OP(10,(o->sgd_step(be,(size_t)H*I,q->W1,q->G1,NULL,0.01f,0,0,0,1.f/sc,m?AB_F16:AB_F32,m?q->W1c:NULL),
           o->sgd_step(be,H,q->b1,q->g1,NULL,0.01f,0,0,0,1.f/sc,m?AB_F16:AB_F32,m?q->b1c:NULL),
           o->sgd_step(be,(size_t)O*H,q->W2,q->G2,NULL,0.01f,0,0,0,1.f/sc,m?AB_F16:AB_F32,m?q->W2c:NULL),
           o->sgd_step(be,O,q->b2,q->g2,NULL,0.01f,0,0,0,1.f/sc,m?AB_F16:AB_F32,m?q->b2c:NULL)));
    OP(11,m?(o->unscale_check(be,H,q->g1,1,&finf,NULL),o->unscale_check(be,O,q->g2,1,&finf,NULL)):0);
  }
  const char*mn[3]={"fp32","amp",xv?xv:""};
  double med[3][NOPS+1]; double *v=malloc(sizeof(double)*steps);
  for(int mode=0;mode<nm3;mode++) for(int k=0;k<=NOPS;k++){ int n=0;
    for(int it=0;it<steps;it++){ if((it/50)%nm3!=mode||it%50<10||it<200) continue; double x=0; if(k<NOPS) x=t[(size_t)it*NOPS+k]; else for(int j=0;j<NOPS;j++) x+=t[(size_t)it*NOPS+j]; v[n++]=x; }
    qsort(v,n,sizeof *v,cmp); med[mode][k]=v[n/2]*1e6; }
  printf("%-8s","op"); for(int mode=0;mode<nm3;mode++) printf(" %10s",mn[mode]); printf("\n");
  for(int k=0;k<=NOPS;k++){ printf("%-8s",k<NOPS?nm[k]:"STEP"); for(int mode=0;mode<nm3;mode++) printf(" %10.2f",med[mode][k]); printf("\n"); }
  double sum[3]={0}; for(int mode=0;mode<nm3;mode++) for(int k=0;k<NOPS;k++) sum[mode]+=med[mode][k];
  printf("%-8s","sum"); for(int mode=0;mode<nm3;mode++) printf(" %10.2f",sum[mode]); printf("\nAMP/FP32 (step medians) %.3f", med[1][NOPS]/med[0][NOPS]); if(xv) printf("  %s: %.3f", xv, med[2][NOPS]/med[0][NOPS]); printf("\n");
  { int nf=0,sub=0; for(int i=0;i<H*I;i++){ float x=s[1].W1[i]; if(!(x-x==0)) nf++; uint16_t h=((uint16_t*)s[1].W1c)[i]; if((h&0x7c00)==0 && (h&0x3ff)) sub++; } printf("AMP's weights: %d not finite (must be 0); %d of the fp16 copy subnormal\n",nf,sub); }
  return 0;}
