/*
** error.c -- status codes and the thread-local error message.
** A failing function sets the message and returns its code; the Lua
** binding reads the message when it turns the status into a Lua error.
*/
#include "internal.h"

#include <stdarg.h>

static _Thread_local char em__errbuf[2048];

em_status em_verror(em_status code, const char *fmt, va_list ap) {
  char tmp[sizeof em__errbuf];
  /* Format into a temporary: fmt's arguments may point into em__errbuf
  ** (a caller prefixing the current message). */
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  memcpy(em__errbuf, tmp, sizeof tmp);
  return code;
}

em_status em_error(em_status code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  em_verror(code, fmt, ap);
  va_end(ap);
  return code;
}

const char *em_error_message(void) { return em__errbuf; }

const char *em_status_name(em_status s) {
  switch (s) {
    case EM_OK: return "ok";
    case EM_ERR_ARG: return "bad argument";
    case EM_ERR_SHAPE: return "shape error";
    case EM_ERR_DTYPE: return "dtype error";
    case EM_ERR_DEVICE: return "device error";
    case EM_ERR_INDEX: return "index out of range";
    case EM_ERR_OOM: return "out of memory";
    case EM_ERR_BACKEND: return "backend error";
    case EM_ERR_PLUGIN: return "plugin error";
    case EM_ERR_AUTOGRAD: return "autograd error";
    case EM_ERR_IO: return "i/o error";
    case EM_ERR_UNSUPPORTED: return "unsupported";
  }
  return "unknown error";
}

em_status em__kernel_fail(const char *op, em_status s) {
  const char *msg = em_error_message();
  /* Kernels name themselves; add the op unless the message already starts with it. */
  size_t n = strlen(op);
  if (strncmp(msg, op, n) == 0 && msg[n] == ':') return s;
  return em_error(s, "%s: %s", op, msg);
}
