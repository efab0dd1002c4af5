/* Host time of fa_plan_sm90_window_snake on the development machine: gcc -std=c11 -O2 -Icsrc -Icsrc/cuda
 * bench/log/2026-12-07-fifth/plan_time.c csrc/cuda/plan.c csrc/fa_common.c -lm (columns: the figure, µs a call). */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <time.h>
#include "fa.h"
#include "plan.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
static void pt(const char*n,long B,long H,long N,long BM,long BN,long left){long nq=(N+BM-1)/BM;long nt=B*H*nq;long g=nt<132?nt:132;
 double r=0; int reps=200; double t0=now(); for(int i=0;i<reps;i++) r+=fa_plan_sm90_window_snake(B*H,nq,g,BM,BN,N,N,0,left); double t=(now()-t0)/reps;
 printf("%-22s %.3f  %8.1f us\n",n,r/reps,t*1e6);}
int main(void){
 pt("d64 1024 4x4k",4,32,4096,192,128,1024); pt("d64 1024 16k",1,32,16384,192,128,1024); pt("d64 1024 8x8k",8,32,8192,192,128,1024);
 pt("d128 1024 16k",1,16,16384,128,128,1024); pt("d64 1024 128k",1,32,131072,192,128,1024); pt("d128 1024 4x64k",4,32,65536,128,128,1024);
 pt("d64 4096 16x16k",16,32,16384,192,128,4096);
 return 0;}
