/* SPDX-License-Identifier: MIT */
#ifndef CGBPF_VERSION_H
#define CGBPF_VERSION_H

#ifndef CGBPF_VERSION
#define CGBPF_VERSION "0.2.0"
#endif

#endif
