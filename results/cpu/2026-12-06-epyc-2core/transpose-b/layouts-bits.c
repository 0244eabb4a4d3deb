/* Which shapes oneDNN's sgemm sums differently when B is stored transposed: op(A) B against A B^T
 * stored, the same logical matrices, every M, N, K of the lists below, one thread; prints each shape
 * whose C differs in any bit, then the count.
 * gcc -O2 layouts-bits.c -o layouts-bits -ldnnl && ./layouts-bits > layouts-bits.txt */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dnnl.h>
static void*A(size_t n){return aligned_alloc(64,(n*4+63)/64*64);}
static int run(int M,int N,int K){
  float *a=A((size_t)M*K),*b=A((size_t)N*K),*bt=A((size_t)N*K),*c1=A((size_t)M*N),*c2=A((size_t)M*N);
  for(size_t i=0;i<(size_t)M*K;i++)a[i]=((i*2654435761u)%1000)*0.001f-0.5f; for(size_t i=0;i<(size_t)N*K;i++)b[i]=((i*40503u)%1000)*0.00123f-0.5f;
  for(int k=0;k<K;k++)for(int n=0;n<N;n++)bt[(size_t)n*K+k]=b[(size_t)k*N+n];
  dnnl_sgemm('N','N',M,N,K,1.f,a,K,b,N,0.f,c1,N); dnnl_sgemm('N','T',M,N,K,1.f,a,K,bt,K,0.f,c2,N);
  int d=memcmp(c1,c2,(size_t)M*N*4)!=0; if(d)printf("%d x %d x %d differ\n",M,N,K); free(a);free(b);free(bt);free(c1);free(c2); return d;
}
int main(){ int Ms[]={1,2,4,8,16,17,31,32,33,48,64,96,128,256,512}; int Ns[]={1,2,3,8,10,16,17,31,32,64,100,128,256,257,512,1024}; int Ks[]={1,7,16,32,64,100,256,784,2048};
 int bad=0,tot=0; for(int i=0;i<15;i++)for(int j=0;j<16;j++)for(int k=0;k<9;k++){bad+=run(Ms[i],Ns[j],Ks[k]);tot++;} printf("%d of %d differ\n",bad,tot);}
