#include "tpu/tpu.h"

void tpu_runtime_shutdown(void) {}
