/* halojit embedding API (C ABI): run artifacts written by
 * `TracedFunction.dump` from C or C++, with no Python and no libHalide.
 *
 *   hj_artifact *a;
 *   if (hj_artifact_open("model.hjm", NULL, &a) != HJ_OK) {
 *       fprintf(stderr, "%s\n", hj_last_error());
 *       return 1;
 *   }
 *   int64_t shape[2] = {4, 1024};
 *   hj_array x = {x_data, HJ_FLOAT32, 2, shape, NULL};   // NULL strides: C-contiguous
 *   hj_array y = {y_data, HJ_FLOAT32, 2, shape, NULL};
 *   hj_status s = hj_artifact_run(a, &x, 1, &y, 1);
 *   hj_artifact_close(a);
 *
 * Every function that can fail returns an hj_status; on failure
 * hj_last_error() holds a message (per thread) saying what was expected and
 * what was given. No C++ exception crosses this interface. An artifact may
 * be run from several threads at once. Arrays follow numpy conventions:
 * shape in C order (last axis fastest), strides in bytes (any sign); the
 * caller owns their memory, which is read (inputs) or written (outputs) in
 * place, without copies where the layout allows.
 */
#ifndef HALOJIT_HALOJIT_H
#define HALOJIT_HALOJIT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define HJ_API __declspec(dllimport)
#else
#define HJ_API __attribute__((visibility("default")))
#endif

#define HJ_ABI_VERSION 1

typedef enum hj_status {
    HJ_OK = 0,
    HJ_ERROR_VALUE = 1,         /* a bad argument: count, dtype, shape, strides, index */
    HJ_ERROR_TYPE = 2,          /* an argument of the wrong kind */
    HJ_ERROR_RUNTIME = 3,       /* a kernel failed, or a file could not be loaded */
    HJ_ERROR_ARTIFACT = 4,      /* truncated, corrupt, foreign or newer artifact, or a CPU it cannot run on */
    HJ_ERROR_OUT_OF_MEMORY = 5,
    HJ_ERROR_UNKNOWN = 6,
    HJ_ERROR_DEVICE = 7         /* a CUDA artifact on a machine without a driver, a device, or a recent enough one */
} hj_status;

typedef enum hj_dtype {
    HJ_BOOL = 0, /* one byte per element, as numpy */
    HJ_INT8 = 1,
    HJ_INT16 = 2,
    HJ_INT32 = 3,
    HJ_INT64 = 4,
    HJ_UINT8 = 5,
    HJ_UINT16 = 6,
    HJ_UINT32 = 7,
    HJ_UINT64 = 8,
    HJ_FLOAT16 = 9,
    HJ_FLOAT32 = 10,
    HJ_FLOAT64 = 11
} hj_dtype;

/* A borrowed array. `strides` in bytes; NULL means C-contiguous. */
typedef struct hj_array {
    void *data;
    hj_dtype dtype;
    int32_t ndim;
    const int64_t *shape;
    const int64_t *strides;
} hj_array;

typedef struct hj_artifact hj_artifact; /* a loaded artifact */
typedef struct hj_tensor hj_tensor;     /* an array owned by the runtime */

HJ_API int hj_abi_version(void);
HJ_API const char *hj_version(void);
/* The message of this thread's last failure ("" if none). */
HJ_API const char *hj_last_error(void);
/* "float32", ...; "?" for a value outside hj_dtype. */
HJ_API const char *hj_dtype_name(hj_dtype dtype);
HJ_API size_t hj_dtype_size(hj_dtype dtype);

/* Reads and verifies the artifact at `path` and loads its kernels for
 * `level` (NULL: $HALOJIT_ARTIFACT_LEVEL, else the best this CPU runs). */
HJ_API hj_status hj_artifact_open(const char *path, const char *level, hj_artifact **out);
HJ_API void hj_artifact_close(hj_artifact *artifact); /* NULL is fine */

/* Strings stay valid until hj_artifact_close; NULL for a bad index. */
HJ_API const char *hj_artifact_function(const hj_artifact *artifact);
HJ_API const char *hj_artifact_level(const hj_artifact *artifact);
HJ_API size_t hj_artifact_num_inputs(const hj_artifact *artifact);
HJ_API size_t hj_artifact_num_outputs(const hj_artifact *artifact);
HJ_API const char *hj_artifact_input_name(const hj_artifact *artifact, size_t i);
HJ_API const char *hj_artifact_output_name(const hj_artifact *artifact, size_t i);

/* Specializations: the input/output shapes an artifact was compiled for. */
HJ_API size_t hj_artifact_num_specializations(const hj_artifact *artifact);
HJ_API hj_status hj_artifact_input_spec(const hj_artifact *artifact, size_t spec, size_t i, hj_dtype *dtype,
                                        int32_t *ndim, const int64_t **shape);
HJ_API hj_status hj_artifact_output_spec(const hj_artifact *artifact, size_t spec, size_t i, hj_dtype *dtype,
                                         int32_t *ndim, const int64_t **shape);
/* The specialization matching these inputs, or -1. */
HJ_API int64_t hj_artifact_find_specialization(const hj_artifact *artifact, const hj_array *inputs, size_t n_inputs);

/* Runs on caller-owned outputs. All arrays are checked before any kernel runs. */
HJ_API hj_status hj_artifact_run(const hj_artifact *artifact, const hj_array *inputs, size_t n_inputs,
                                 const hj_array *outputs, size_t n_outputs);
/* Runs into outputs allocated by the runtime: outputs[k] receives a tensor
 * the caller frees with hj_tensor_free. */
HJ_API hj_status hj_artifact_run_alloc(const hj_artifact *artifact, const hj_array *inputs, size_t n_inputs,
                                       hj_tensor **outputs, size_t n_outputs);

/* Test vectors recorded by dump (example inputs and expected outputs, with
 * the tolerances to compare them by). Arrays are new tensors to free. */
HJ_API size_t hj_artifact_num_test_vectors(const hj_artifact *artifact);
HJ_API hj_status hj_artifact_test_vector(const hj_artifact *artifact, size_t i, hj_tensor **inputs, size_t n_inputs,
                                         hj_tensor **expected, size_t n_outputs, double *rtol, double *atol);

/* A view of a runtime-owned tensor (valid until hj_tensor_free). */
HJ_API hj_array hj_tensor_array(const hj_tensor *tensor);
HJ_API void hj_tensor_free(hj_tensor *tensor); /* NULL is fine */

/* numpy.allclose(got, expected, rtol, atol, equal_nan=True); exact for
 * integers. *close is 1 or 0; on 0 hj_last_error() says where. */
HJ_API hj_status hj_allclose(const hj_array *got, const hj_array *expected, double rtol, double atol, int *close);

/* Threads of the Halide runtime (0 = one per core); needs an open artifact. */
HJ_API hj_status hj_set_num_threads(int n);

#ifdef __cplusplus
}
#endif

#endif /* HALOJIT_HALOJIT_H */
