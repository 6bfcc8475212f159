/* The machine's NVIDIA GPUs as the driver's /proc files list them (/proc/driver/nvidia/gpus/
 * <bus id>/information: "GPU UUID:", "Model:"): each GPU's index as nvidia-smi numbers it
 * (the order of the PCI bus ids, which is NVML's), found by UUID, so that gpupool-stat's GPU
 * lines carry the number users know. Read once; no CUDA, no NVML. Where the files are not
 * there (no NVIDIA driver, a container that hides them, the fake runtime) there is no index. */
#ifndef GP_STAT_GPUS_H
#define GP_STAT_GPUS_H

#include "gpupool/stats.h"

#define GP_STAT_GPUS_DIR "/proc/driver/nvidia/gpus"
#define GP_STAT_GPUS_MAX 64

struct gp_stat_gpu {
	char bus[32]; /* "0000:18:00.0", the folder's name */
	unsigned char uuid[GPUPOOL_UUID_LEN];
	int index;    /* its place among the folders in bus order, from 0 */
};

/* The GPUs of `dir` (GP_STAT_GPUS_DIR; tests give another) into out[cap], in bus order, each
 * with its index; a folder whose information file has no UUID keeps its index (it is still
 * a GPU nvidia-smi counts) and matches nothing. Returns the count (0 when dir is missing). */
int gp_stat_gpus_read(const char *dir, struct gp_stat_gpu *out, int cap);

/* The index of the GPU with `uuid` among gpus[n], or -1. */
int gp_stat_gpus_index(const struct gp_stat_gpu *gpus, int n, const unsigned char uuid[GPUPOOL_UUID_LEN]);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (any case, blanks around) into 16 bytes: 0, or -1. */
int gp_stat_gpus_parse_uuid(const char *text, unsigned char out[GPUPOOL_UUID_LEN]);

#endif
