/* The four layouts of one product in oneDNN's sgemm on one thread: op(A) op(B) with A and B each
 * stored as it is (N) or transposed (T), the same logical matrices, at the workloads' shapes (MiniLM's
 * linear and attention products, BERT-base's, ResNet-50's layer-4 products at batch 32, the MLP's):
 * the best of 5 repeats of about 1 GFLOP each, and whether the four results are bit for bit the same.
 * gcc -O2 layouts.c -o layouts -ldnnl && ./layouts > layouts.txt */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dnnl.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void*A(size_t n){return aligned_alloc(64,(n*4+63)/64*64);}
/* rate of op(A) op(B) for each ta,tb with the same logical matrices */
static void run(int M,int N,int K){
  float *a=A((size_t)M*K),*at=A((size_t)M*K),*b=A((size_t)N*K),*bt=A((size_t)N*K),*c[4];
  for(int i=0;i<4;i++)c[i]=A((size_t)M*N);
  for(size_t i=0;i<(size_t)M*K;i++)a[i]=((i*2654435761u)%1000)*0.001f-0.5f; for(size_t i=0;i<(size_t)N*K;i++)b[i]=((i*40503u)%1000)*0.001f-0.5f;
  for(int m=0;m<M;m++)for(int k=0;k<K;k++)at[(size_t)k*M+m]=a[(size_t)m*K+k]; /* a: M x K (N), at: K x M (T) */
  for(int k=0;k<K;k++)for(int n=0;n<N;n++)bt[(size_t)n*K+k]=b[(size_t)k*N+n]; /* b: K x N (N), bt: N x K (T) */
  int R=(int)(1e9/(2.0*M*N*K))+1; double best[4]={1e9,1e9,1e9,1e9};
  for(int rep=0;rep<5;rep++) for(int v=0;v<4;v++){ int ta=v>>1,tb=v&1;
    double t0=now(); for(int r=0;r<R;r++) dnnl_sgemm(ta?'T':'N',tb?'T':'N',M,N,K,1.f,ta?at:a,ta?M:K,tb?bt:b,tb?K:N,0.f,c[v],N); double t1=now();
    if(t1-t0<best[v])best[v]=t1-t0; }
  double fl=2.0*M*N*K*R/1e9;
  printf("%4d x %4d x %4d: NN %6.1f  NT %6.1f  TN %6.1f  TT %6.1f GF/s  bits %s\n",M,N,K,fl/best[0],fl/best[1],fl/best[2],fl/best[3],
     memcmp(c[0],c[1],(size_t)M*N*4)||memcmp(c[0],c[2],(size_t)M*N*4)?"differ":"same");
}
int main(){
  run(256,1536,384); run(256,384,1536); run(256,384,384); run(384,1536,256); run(1536,384,256); run(384,384,256);
  run(128,768,768); run(128,3072,768); run(768,3072,128); run(64,64,32); run(64,32,64); run(32,64,64); run(64,64,64);
  run(32,512,4608); run(512,4608,32); run(32,4608,512); run(64,256,784); run(256,784,64);
}
