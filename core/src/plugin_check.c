/*
** plugin_check.c -- checks on a plugin file's bytes and on its info
** struct, made before the loader trusts either.
**
** dlopen maps each PT_LOAD segment of a shared object; when the file is
** shorter than a segment (a half-copied .so), touching the missing pages
** raises SIGBUS inside the dynamic loader and kills the process. So the
** ELF header, the program headers and every loadable segment are checked
** to lie inside the file first. These functions work on plain bytes and
** never call plugin code, so tests/fuzz/ runs them on arbitrary input.
*/
#include "internal.h"

#include "ember_attention.h"

#include <elf.h>
#include <stdarg.h>

static bool em__fail(char *reason, size_t n, const char *fmt, ...) EM_PRINTF(3, 4);

static bool em__fail(char *reason, size_t n, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  if (n) vsnprintf(reason, n, fmt, ap);
  va_end(ap);
  return false;
}

/* Does [off, off + len) lie inside a file of `size` bytes? */
static bool em__fits(uint64_t off, uint64_t len, uint64_t size) {
  return off <= size && len <= size - off;
}

#if defined(__x86_64__)
#define EM__ELF_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define EM__ELF_MACHINE EM_AARCH64
#endif

bool em__elf_check(const unsigned char *file, size_t size, char *reason, size_t n) {
  Elf64_Ehdr eh;
  if (size < SELFMAG || memcmp(file, ELFMAG, SELFMAG) != 0)
    return em__fail(reason, n, "not an ELF file (%zu bytes, no ELF magic)", size);
  if (size < sizeof eh)
    return em__fail(reason, n, "file is %zu bytes, shorter than its %zu-byte ELF header (truncated?)",
                    size, sizeof eh);
  if (file[EI_CLASS] != ELFCLASS64)
    return em__fail(reason, n, "not a 64-bit ELF file (class %u)", file[EI_CLASS]);
  memcpy(&eh, file, sizeof eh);
  const unsigned native = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
  if (file[EI_DATA] != native) return em__fail(reason, n, "ELF file of the other byte order");
  if (eh.e_type != ET_DYN)
    return em__fail(reason, n, "ELF type %u is not a shared object", (unsigned)eh.e_type);
#ifdef EM__ELF_MACHINE
  if (eh.e_machine != EM__ELF_MACHINE)
    return em__fail(reason, n, "ELF machine %u is not this machine's (%u)", (unsigned)eh.e_machine,
                    (unsigned)EM__ELF_MACHINE);
#endif
  if (eh.e_phnum == 0 || eh.e_phentsize != sizeof(Elf64_Phdr))
    return em__fail(reason, n, "ELF file has %u program headers of %u bytes (expected %zu)",
                    (unsigned)eh.e_phnum, (unsigned)eh.e_phentsize, sizeof(Elf64_Phdr));
  uint64_t phbytes = (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr);
  if (!em__fits(eh.e_phoff, phbytes, size))
    return em__fail(reason, n,
                    "program headers (bytes %llu..%llu) extend past the end of the %zu-byte file "
                    "(truncated?)", (unsigned long long)eh.e_phoff,
                    (unsigned long long)eh.e_phoff + phbytes, size);
  int nload = 0;
  for (unsigned i = 0; i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    memcpy(&ph, file + eh.e_phoff + (uint64_t)i * sizeof ph, sizeof ph);
    if (ph.p_type != PT_LOAD && ph.p_type != PT_DYNAMIC) continue;
    nload += ph.p_type == PT_LOAD;
    if (!em__fits(ph.p_offset, ph.p_filesz, size))
      return em__fail(reason, n,
                      "%s segment %u (bytes %llu..%llu) extends past the end of the %zu-byte file "
                      "(truncated?)", ph.p_type == PT_LOAD ? "loadable" : "dynamic", i + 1,
                      (unsigned long long)ph.p_offset,
                      (unsigned long long)ph.p_offset + (unsigned long long)ph.p_filesz, size);
    if (ph.p_type == PT_LOAD && ph.p_filesz > ph.p_memsz)
      return em__fail(reason, n, "loadable segment %u has more file bytes than memory bytes", i + 1);
  }
  if (nload == 0) return em__fail(reason, n, "ELF file has no loadable segment");
  /* The loader does not read section headers, but a file whose section
  ** table is cut off was cut off: say so rather than load half a copy. */
  if (eh.e_shoff && !em__fits(eh.e_shoff, (uint64_t)eh.e_shnum * eh.e_shentsize, size))
    return em__fail(reason, n,
                    "section headers (from byte %llu) extend past the end of the %zu-byte file "
                    "(truncated?)", (unsigned long long)eh.e_shoff, size);
  return true;
}

/* A plugin name: 1..63 characters of [A-Za-z0-9_.-], so it fits the
** record and reads well in messages and option strings. */
static bool em__good_name(const char *s) {
  size_t len = strlen(s);
  if (len == 0 || len > 63) return false;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '.' || c == '-'))
      return false;
  }
  return true;
}

bool em__plugin_info_check(const em_plugin_info *info, char *reason, size_t n) {
  if (info->kind != EM_PLUGIN_BACKEND && info->kind != EM_PLUGIN_ATTENTION)
    return em__fail(reason, n, "unknown plugin kind %u", info->kind);
  uint32_t want = info->kind == EM_PLUGIN_BACKEND ? EM_BACKEND_ABI_VERSION : EM_ATTENTION_ABI_VERSION;
  if (info->abi_version != want)
    return em__fail(reason, n, "ABI version mismatch: plugin has %u, this ember expects %u for %s plugins",
                    info->abi_version, want, info->kind == EM_PLUGIN_BACKEND ? "backend" : "attention");
  if (!info->name || !info->name[0]) return em__fail(reason, n, "plugin info has no name");
  if (!em__good_name(info->name))
    return em__fail(reason, n, "plugin name '%.80s' is not 1..63 characters of [A-Za-z0-9_.-]",
                    info->name);
  return true;
}
