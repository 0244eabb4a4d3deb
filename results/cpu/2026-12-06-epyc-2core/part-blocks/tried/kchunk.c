#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dnnl.h>
int main(void){
  int shapes[][3]={{64,1536,2048},{64,384,2048},{192,384,2048},{32,784,64},{64,384,256}};
  for(int s=0;s<5;s++){int M=shapes[s][0],N=shapes[s][1],K=shapes[s][2];
   float*A=malloc(sizeof(float)*K*M),*B=malloc(sizeof(float)*K*N),*C1=calloc(M*N,4),*C2=calloc(M*N,4);
   srand(1); for(long i=0;i<(long)K*M;i++)A[i]=(rand()%20001-10000)/1e4f*(1+(i%7)*0.37f);
   for(long i=0;i<(long)K*N;i++)B[i]=(rand()%20001-10000)/1e4f*(1+(i%5)*0.71f);
   /* TN: C = A^T B, A stored K x M (lda M), B K x N (ldb N); row-major dnnl_sgemm */
   dnnl_sgemm('T','N',M,N,K,1.f,A,M,B,N,0.f,C1,N);
   int chunks[]={16,32,64,96,128,192,256,320,384,512,1024};
   for(int c=0;c<11;c++){int kc=chunks[c]; if(kc>=K)continue;
     for(int k0=0;k0<K;k0+=kc){int kk=K-k0<kc?K-k0:kc; dnnl_sgemm('T','N',M,N,kk,1.f,A+(long)k0*M,M,B+(long)k0*N,N,k0?1.f:0.f,C2,N);}
     long diff=0; for(long i=0;i<M*N;i++) diff+=memcmp(&C1[i],&C2[i],4)!=0;
     printf("M%d N%d K%d chunk %d: %ld of %d differ\n",M,N,K,kc,diff,M*N);}
  }
  return 0;}
