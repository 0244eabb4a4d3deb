/* The MLP's AMP ops against their fp32 twins, one at a time in one process: the first layer's
 * forward product with its bias and ReLU (64 x 256 x 784, W transposed), the second's (64 x 10 x 256),
 * the weight gradients (fp32: a product into G; AMP: gemm_fold, rounded to fp16 and folded), dH, SGD
 * without momentum over W1 (the recipe's; AMP writing the fp16 copy) and, AMP alone, the finite check
 * over W1's gradient (the trainer runs it only over what no fold checked). 2 threads; each op the
 * median of R timings of 50 calls (us a call). usage: mlp_ops [R] [op]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend.h"
#include "backend_cpu.h"
#include "half.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
enum{B_=64,I=784,H=256,O=10};
static float *X,*W1,*b1,*Hh,*W2,*L,*dL,*dH,*G1,*G2,*mom,*b2; static uint16_t *Xh,*W1h,*Hhh,*W2h,*Lh,*dLh,*dHh; static float bias32[256];
static ab_backend *be; static int32_t finf;
static void op(int k,int p){
  const ab_backend_ops*o=be->ops;
  if(p==0) switch(k){
   case 0: o->gemm(be,0,1,B_,H,I,1,AB_F32,X,I,AB_F32,W1,I,b1,AB_EPI_RELU,0,AB_F32,Hh,H);break;
   case 1: o->gemm(be,0,1,B_,O,H,1,AB_F32,Hh,H,AB_F32,W2,H,b2,AB_EPI_NONE,0,AB_F32,L,O);break;
   case 2: o->gemm(be,1,0,O,H,B_,1,AB_F32,dL,O,AB_F32,Hh,H,NULL,AB_EPI_NONE,0,AB_F32,G2,H);break;
   case 3: o->gemm(be,0,0,B_,H,O,1,AB_F32,dL,O,AB_F32,W2,H,NULL,AB_EPI_NONE,0,AB_F32,dH,H);break;
   case 4: o->gemm(be,1,0,H,I,B_,1,AB_F32,dH,H,AB_F32,X,I,NULL,AB_EPI_NONE,0,AB_F32,G1,I);break;
   case 5: o->sgd_step(be,(size_t)H*I,W1,G1,NULL,0.01f,0.0f,0,0,1.0f,AB_F32,NULL);break;
   case 6: break;
  } else switch(k){
   case 0: o->gemm(be,0,1,B_,H,I,1,AB_F16,Xh,I,AB_F16,W1h,I,b1,AB_EPI_RELU,0,AB_F16,Hhh,H);break;
   case 1: o->gemm(be,0,1,B_,O,H,1,AB_F16,Hhh,H,AB_F16,W2h,H,b2,AB_EPI_NONE,0,AB_F16,Lh,O);break;
   case 2: o->gemm_fold(be,1,0,O,H,B_,AB_F16,dLh,O,AB_F16,Hhh,H,AB_F16,NULL,G2,0,&finf);break;
   case 3: o->gemm(be,0,0,B_,H,O,1,AB_F16,dLh,O,AB_F16,W2h,H,NULL,AB_EPI_NONE,0,AB_F16,dHh,H);break;
   case 4: o->gemm_fold(be,1,0,H,I,B_,AB_F16,dHh,H,AB_F16,Xh,I,AB_F16,NULL,G1,0,&finf);break;
   case 5: o->sgd_step(be,(size_t)H*I,W1,G1,NULL,0.01f,0.0f,0,0,1.0f/1024,AB_F16,W1h);break;
   case 6: o->unscale_check(be,(size_t)H*I,G1,1.0f,&finf,NULL);break;
  }
}
int main(int argc,char**argv){
  be=ab_backend_cpu_create(2); int reps=argc>1?atoi(argv[1]):31;
  #define AL(p,n) p=calloc(n,4)
  AL(X,B_*I);AL(W1,H*I);AL(b1,H);AL(Hh,B_*H);AL(W2,O*H);AL(L,B_*O);AL(dL,B_*O);AL(dH,B_*H);AL(G1,H*I);AL(G2,O*H);AL(mom,H*I);AL(b2,O);
  Xh=calloc(B_*I,2);W1h=calloc(H*I,2);Hhh=calloc(B_*H,2);W2h=calloc(O*H,2);Lh=calloc(B_*O,2);dLh=calloc(B_*O,2);dHh=calloc(B_*H,2);
  for(int i=0;i<B_*I;i++){X[i]=(rand()%256)/255.f;Xh[i]=ab_f32_to_f16(X[i]);}
  for(int i=0;i<H*I;i++){W1[i]=(rand()%2000-1000)/30000.f;W1h[i]=ab_f32_to_f16(W1[i]);}
  for(int i=0;i<O*H;i++){W2[i]=(rand()%2000-1000)/30000.f;W2h[i]=ab_f32_to_f16(W2[i]);}
  for(int i=0;i<B_*O;i++){dL[i]=(rand()%2000-1000)/1000.f;dLh[i]=ab_f32_to_f16(dL[i]);}
  for(int i=0;i<B_*H;i++){dH[i]=(rand()%2000-1000)/1000.f;dHh[i]=ab_f32_to_f16(dH[i]);}
  const char*nm[]={"fwd1 NT+bias+relu","fwd2 NT+bias","dW2 TN","dH NN","dW1 TN","sgd W1","check W1"};
  double tot[2]={0,0};
  int k0=argc>2?atoi(argv[2]):0,k1=argc>2?k0+1:7; for(int k=k0;k<k1;k++){ double med[2];
    for(int p=0;p<2;p++){double t[1001];
      for(int r=0;r<reps;r++){double t0=now();for(int q=0;q<50;q++) op(k,p); t[r]=(now()-t0)/50;}
      qsort(t,reps,sizeof t[0],cmp); med[p]=t[reps/2]*1e6; tot[p]+=med[p];}
    printf("%-20s fp32 %7.2f us  amp %7.2f us  (+%.2f)\n",nm[k],med[0],med[1],med[1]-med[0]);}
  printf("total fp32 %.1f amp %.1f us\n",tot[0],tot[1]);
  return 0;}
