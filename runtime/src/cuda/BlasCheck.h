// cuBLAS's status as the runtime's error (Linear.cu): shared by the files
// that call cuBLAS.
#pragma once

#include <cublas_api.h>

namespace autoshard::rt::cuda {

/// Fatal, naming `what` and cuBLAS's status, unless it is success.
void checkBlas(cublasStatus_t status, const char *what);

} // namespace autoshard::rt::cuda
