/*
** cpu_cast_tmpl.h -- one run of a copy with a dtype cast; included by
** cpu_elementwise.c once per (source, destination) pair with TS, TD,
** CONV (a TS value to a TD) and NAME set, and undefines them.
*/

CPU_VECTOR_CLONES static void NAME(char **p, const int64_t *s, int64_t n) {
  if (s[0] == (int64_t)sizeof(TD) && s[1] == (int64_t)sizeof(TS)) {
    TD *d = (TD *)p[0];
    const TS *src = (const TS *)p[1];
    for (int64_t i = 0; i < n; i++) d[i] = CONV(src[i]);
  } else {
    char *d = p[0];
    const char *src = p[1];
    for (int64_t i = 0; i < n; i++, d += s[0], src += s[1]) *(TD *)d = CONV(*(const TS *)src);
  }
}

#undef TS
#undef TD
#undef CONV
#undef NAME
