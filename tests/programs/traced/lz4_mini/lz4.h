/* A small LZ4 block-format codec with the three calls of lz4.h that lz4_omp.c uses, so the
 * "real library" test needs no download: a greedy compressor with a 4096-entry hash table of
 * 4-byte sequences (the format of the LZ4 block specification: token, literal length,
 * literals, 2-byte offset, match length; the last 5 bytes are literals) and a bounds-checked
 * decompressor. */
#ifndef LZ4_MINI_H
#define LZ4_MINI_H
int LZ4_compressBound(int inputSize);
int LZ4_compress_default(const char *src, char *dst, int srcSize, int dstCapacity);
int LZ4_decompress_safe(const char *src, char *dst, int compressedSize, int dstCapacity);
#endif
