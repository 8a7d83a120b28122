/* SPDX-License-Identifier: BSD-3-Clause */
/* placeholder: being written */
typedef int rdax_placeholder_volume;
