// Declarations only; the driver itself comes from libclang_rt.fuzzer via -sanitize=fuzzer.
#include "CFuzzerDriver.h"
