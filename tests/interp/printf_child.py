"""Runs gap_kernels.print_values once and exits: on the GPU (argument "gpu") or in the
interpreter as the target named. The parent test reads the printed lines from this process's
stdout: device printf writes to the C-level stdout, so C stdio is flushed before exiting."""
import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import opus  # noqa: E402
import gap_kernels as GK  # noqa: E402


def run_on_gpu():
    from opus.runtime import cuda_driver
    from opus.runtime.device_array import DeviceArray
    x, y = DeviceArray.from_numpy(GK.PRINT_X), DeviceArray.from_numpy(GK.PRINT_Y)
    with opus.set_target(opus.current_target().target.name, interpret=False):
        GK.print_values[1, 32](x, y, len(GK.PRINT_X))
    cuda_driver.synchronize()  # the device's printf buffer is written out here


def main(where):
    if where == "gpu":
        run_on_gpu()
    else:
        with opus.set_target(where, interpret=True):
            GK.print_values[1, 32](GK.PRINT_X, GK.PRINT_Y, len(GK.PRINT_X))
    sys.stdout.flush()
    ctypes.CDLL(None).fflush(None)


if __name__ == "__main__":
    main(sys.argv[1])
