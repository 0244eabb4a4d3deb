/* batch norm forward (training, fused ReLU) and backward at ResNet-50 shapes (M rows x C channels),
 * fp32 and fp16, 2 threads, the CPU backend as linked: the median of R calls of each (us). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "backend.h"
#include "backend_cpu.h"
#include "half.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+1e-9*t.tv_nsec;}
static int cmp(const void*a,const void*b){double x=*(double*)a,y=*(double*)b;return x<y?-1:x>y;}
int main(int argc,char**argv){
  ab_backend*be=ab_backend_cpu_create(2); const ab_backend_ops*o=be->ops;
  int shapes[][2]={{32768,64},{32768,256},{8192,128},{8192,512},{2048,256},{2048,1024},{512,512},{512,2048}};
  int reps=argc>1?atoi(argv[1]):11; double tot[2][2]={{0}};
  for(int s=0;s<8;s++){int M=shapes[s][0],C=shapes[s][1]; size_t n=(size_t)M*C;
    float*x=malloc(n*4),*dy=malloc(n*4),*y=malloc(n*4),*g=malloc(C*4),*b=malloc(C*4),*rm=calloc(C,4),*rv=calloc(C,4),*sm=malloc(C*4),*si=malloc(C*4),*dg=malloc(C*4),*db=malloc(C*4);
    uint16_t*xh=malloc(n*2),*dyh=malloc(n*2),*yh=malloc(n*2);
    for(size_t i=0;i<n;i++){x[i]=(rand()%2000-1000)/300.f;dy[i]=(rand()%2000-1000)/3000.f;xh[i]=ab_f32_to_f16(x[i]);dyh[i]=ab_f32_to_f16(dy[i]);}
    for(int c=0;c<C;c++){g[c]=1;b[c]=0;}
    printf("M=%5d C=%4d",M,C);
    for(int p=0;p<2;p++){ab_dtype t=p?AB_F16:AB_F32; void*X=p?(void*)xh:x,*DY=p?(void*)dyh:dy,*Y=p?(void*)yh:y;
      double tf[101],tb[101];
      for(int r=0;r<reps;r++){double t0=now();o->batchnorm_forward_train(be,M,C,t,X,g,b,1e-5f,0.1f,rm,rv,sm,si,1,Y);double t1=now();
        o->batchnorm_backward(be,M,C,t,X,DY,g,sm,si,0.0f,dg,db,Y);double t2=now();tf[r]=t1-t0;tb[r]=t2-t1;}
      qsort(tf,reps,8,cmp);qsort(tb,reps,8,cmp);printf("  %s fwd %7.1f bwd %7.1f us",p?"f16":"f32",tf[reps/2]*1e6,tb[reps/2]*1e6);
      tot[p][0]+=tf[reps/2];tot[p][1]+=tb[reps/2];}
    printf("\n");}
  printf("total f32 fwd %.0f bwd %.0f  f16 fwd %.0f bwd %.0f us\n",tot[0][0]*1e6,tot[0][1]*1e6,tot[1][0]*1e6,tot[1][1]*1e6);
}
