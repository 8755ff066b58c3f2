/* tierlab_trace.h: mark a program's region of interest for `tierlab trace --cc`.
 *
 *   #include "tierlab_trace.h"
 *   TIERLAB_TRACE_START();   ... the accesses to record ...   TIERLAB_TRACE_STOP();
 *
 * Run with TIERLAB_TRACE_ROI=1 (`tierlab trace --roi`) to record only between the marks (the
 * calling thread from the call on, the program's other threads within 4096 of their
 * accesses); without it, recording starts on and the marks switch it. The functions are weak:
 * a program built without tierlab's runtime links and runs, the macros doing nothing.
 * `tierlab trace --print-flags` prints the directory of this header.
 * Written for tierlab (MIT licence). */
#ifndef TIERLAB_TRACE_H
#define TIERLAB_TRACE_H
#ifdef __cplusplus
extern "C" {
#endif
void tierlab_trace_start(void) __attribute__((weak));
void tierlab_trace_stop(void) __attribute__((weak));
#ifdef __cplusplus
}
#endif
#define TIERLAB_TRACE_START()                    \
    do {                                         \
        if (tierlab_trace_start) tierlab_trace_start(); \
    } while (0)
#define TIERLAB_TRACE_STOP()                   \
    do {                                       \
        if (tierlab_trace_stop) tierlab_trace_stop(); \
    } while (0)
#endif
