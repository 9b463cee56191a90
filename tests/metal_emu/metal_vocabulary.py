"""The vocabulary of the Metal conformance pass (conformance.py): every form
kernel code may take, each with where Apple's compiler is known to accept
it. Anything the pass finds in kernel code that is not here is a finding,
until it is reviewed and added with its citation.

A citation is either a section of the Metal Shading Language Specification
3.1 (`Spec`), or a line of MLX 0.32.4's Metal kernels (`Mlx`: a path under
mlx/include/mlx/backend/metal/kernels/ of the pinned mlx-metal wheel, the
line number, and text that line holds), which Apple's compiler builds for
every MLX release; tests/test_metal_conformance.py checks every Mlx line
against the pinned headers. MLX lines from `*_nax.h` files do not count:
those kernels need Metal 4. Section numbers are those of the 3.1 edition.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Spec:
    section: str

    def __str__(self):
        return f"MSL 3.1 {self.section}"


@dataclass(frozen=True)
class Mlx:
    path: str  # relative to mlx/include/mlx/backend/metal/kernels/
    line: int
    snippet: str  # text the line holds

    def __str__(self):
        return f"MLX 0.32.4 kernels/{self.path}:{self.line} `{self.snippet}`"


# Metal is C++14 less the restrictions of §1.4.4 (lambdas, recursion,
# dynamic_cast, typeid, new and delete, noexcept, goto, register and
# thread_local, virtual functions, exceptions, the C++ standard library).
CXX14 = Spec("§1.4 Metal and C++14")
SCALARS = Spec("§2.1 Scalar Data Types")

# Clang AST node kinds (declarations, statements, expressions, attributes)
# that kernel code may contain, those the pass checks: nodes with a location
# that are not implicit. Nodes clang adds for the semantics of an allowed
# construct (implicit casts, temporaries, template substitutions) are listed
# with that construct's citation.
NODES = {
    # Declarations.
    "AccessSpecDecl": CXX14,
    "ClassScopeFunctionSpecializationDecl": Mlx("reduction/ops.h", 216, "template <>"),
    "ClassTemplateDecl": Mlx(
        "steel/attn/mma.h", 36, "template <typename T, int kFragRows_, int kFragCols_>",
    ),
    "ClassTemplatePartialSpecializationDecl": CXX14,
    "ClassTemplateSpecializationDecl": Mlx("sort.h", 32, "template <>"),
    "CXXConstructorDecl": Mlx(
        "steel/attn/mma.h", 27, "Shape2D(RInt r_, CInt c_) thread : r(r_), c(c_) {}",
    ),
    "CXXConversionDecl": Mlx("complex.h", 141, "constexpr operator U() const device {"),
    "CXXMethodDecl": Mlx("steel/attn/mma.h", 71, "METAL_FUNC static constexpr short2 get_coord("),
    "CXXRecordDecl": Mlx("steel/attn/kernels/steel_attention.h", 19, "struct MaxOp {"),
    "EmptyDecl": Mlx(
        "bf16_math.h", 232, "__METAL_MAYBE_FAST_MATH__);"),  # a `;` after a macro's own
    "EnumConstantDecl": CXX14,
    "EnumDecl": CXX14,
    "FieldDecl": CXX14,
    "FunctionDecl": Mlx("fp_quantized.h", 1218, "[[kernel]] void fp_qmv_quad("),
    "FunctionTemplateDecl": Mlx(
        "steel/attn/kernels/steel_attention.h", 20, "template <typename T>",
    ),
    "NamespaceDecl": Mlx("steel/attn/mma.h", 20, "namespace steel {"),
    "NonTypeTemplateParmDecl": Mlx("fp_quantized.h", 30, "template <typename T, int group_size>"),
    "ParmVarDecl": CXX14,
    "StaticAssertDecl": Mlx(
        "steel/attn/kernels/steel_attention.h", 185,
        'static_assert(WN == 1 || WN == 2, "WN must be 1 or 2");',
    ),
    "TemplateTypeParmDecl": Mlx("fp_quantized.h", 30, "template <typename T, int group_size>"),
    "TypeAliasDecl": Mlx("fp_quantized.h", 718, "using W_T = uint32_t;"),
    "TypeAliasTemplateDecl": CXX14,
    "TypedefDecl": Mlx("fp_quantized.h", 292, "typedef float U;"),
    # Variable templates; their variables are checked as declarations.
    "VarTemplateDecl": Mlx("complex.h", 15, "static constexpr constant bool is_complex_v = false;"),
    "VarTemplatePartialSpecializationDecl": Mlx(
        "complex.h", 18, "static constexpr constant bool is_complex_v<complex_t<T>> = true;",
    ),
    "VarTemplateSpecializationDecl": Mlx(
        "complex.h", 15, "static constexpr constant bool is_complex_v = false;",
    ),
    "UsingDirectiveDecl": Mlx(
        "steel/attn/kernels/steel_attention.h", 5, "using namespace mlx::steel;",
    ),
    "VarDecl": Mlx("steel/attn/kernels/steel_attention.h", 91, "ulong3 tidl{tid.x, tid.y, tid.z};"),
    # Statements.
    # A statement under `#pragma clang loop unroll(full)` (STEEL_PRAGMA_UNROLL).
    "AttributedStmt": Mlx("steel/attn/kernels/steel_attention.h", 241, "STEEL_PRAGMA_UNROLL"),
    "BreakStmt": Mlx("atomic.h", 108, "break;"),
    "CompoundStmt": CXX14,
    "ContinueStmt": CXX14,
    "DeclStmt": CXX14,
    "ForStmt": Mlx(
        "steel/attn/kernels/steel_attention.h", 242, "for (short dd = 0; dd < TDh; dd++) {",
    ),
    "IfStmt": Mlx(
        "steel/attn/kernels/steel_attention.h", 235,
        "if (!align_Q && int(tid.x) == (params->NQ_aligned)) {",
    ),
    "NullStmt": CXX14,
    "ReturnStmt": Mlx("steel/attn/kernels/steel_attention.h", 22, "return metal::max(x, y);"),
    "WhileStmt": Mlx("sort.h", 111, "while (A_st < A_ed) {"),
    # Expressions.
    "ArraySubscriptExpr": Mlx(
        "steel/attn/kernels/steel_attention.h", 354, "Stile.elems()[ii] += peer[base + ii];",
    ),
    "BinaryOperator": Mlx("steel/attn/kernels/steel_attention.h", 29, "return x + y;"),
    "CallExpr": Mlx("steel/attn/kernels/steel_attention.h", 22, "return metal::max(x, y);"),
    "CompoundAssignOperator": Mlx(
        "steel/attn/kernels/steel_attention.h", 354, "Stile.elems()[ii] += peer[base + ii];",
    ),
    "ConditionalOperator": Mlx(
        "steel/attn/kernels/steel_attention.h", 130,
        "tgp_mem_0 > tgp_mem_1 ? tgp_mem_0 : tgp_mem_1;",
    ),
    "ConstantExpr": CXX14,
    "CStyleCastExpr": Mlx(
        "fp_quantized.h", 311,
        "auto wl = (const device uint8_t*)(w + row * in_vec_size_w * quads_per_simd);",
    ),
    "CXXBoolLiteralExpr": CXX14,
    "CXXConstructExpr": CXX14,
    "CXXDefaultInitExpr": CXX14,
    "CXXDependentScopeMemberExpr": CXX14,
    "CXXFunctionalCastExpr": Mlx(
        "steel/attn/kernels/steel_attention.h", 342, "short(simd_lane_id)",
    ),
    "CXXMemberCallExpr": Mlx(
        "steel/attn/kernels/steel_attention.h", 354, "Stile.elems()[ii] += peer[base + ii];",
    ),
    "CXXNullPtrLiteralExpr": Mlx(
        "fp_quantized.h", 199, "const device float* global_scale = nullptr) thread",
    ),
    "CXXOperatorCallExpr": CXX14,
    "CXXReinterpretCastExpr": Mlx(
        "steel/attn/kernels/steel_attention.h", 339,
        "reinterpret_cast<threadgroup AccumType*>(KV_smem);",
    ),
    "CXXScalarValueInitExpr": CXX14,
    "CXXStaticCastExpr": Mlx(
        "steel/attn/kernels/steel_attention.h", 277, "static_cast<AccumType>(sinks[tidl.y]);",
    ),
    "CXXTemporaryObjectExpr": Mlx("complex.h", 305, "complex_t<half>{1.0h, 2.0h}"),
    "CXXUnresolvedConstructExpr": CXX14,
    "DeclRefExpr": CXX14,
    "DependentScopeDeclRefExpr": CXX14,
    "ExprWithCleanups": CXX14,
    "ExtVectorElementExpr": Mlx(
        "steel/attn/kernels/steel_attention.h", 219, "const short sm = simd_coord.y;",
    ),
    "FloatingLiteral": CXX14,
    "ImplicitCastExpr": CXX14,
    "InitListExpr": Mlx(
        "steel/attn/kernels/steel_attention.h", 91, "ulong3 tidl{tid.x, tid.y, tid.z};",
    ),
    "IntegerLiteral": CXX14,
    "MaterializeTemporaryExpr": CXX14,
    "MemberExpr": Mlx("steel/attn/kernels/steel_attention.h", 97, "params->gqa_factor"),
    "PackExpansionExpr": Mlx("steel/utils/integral_constant.h", 125, "return x + sum(us...);"),
    "ParenListExpr": Mlx("complex.h", 35, ": real(real), imag(imag) {};"),
    "ParenExpr": CXX14,
    "StringLiteral": Mlx("steel/attn/kernels/steel_attention.h", 185, '"WN must be 1 or 2"'),
    "SubstNonTypeTemplateParmExpr": CXX14,
    "UnaryExprOrTypeTraitExpr": Mlx(
        "steel/attn/kernels/steel_attention.h", 120, "constexpr short padQ = 16 / sizeof(T);",
    ),
    "UnaryOperator": Mlx("steel/attn/kernels/steel_attention.h", 235, "!align_Q"),
    "UnresolvedLookupExpr": CXX14,
    "UnresolvedMemberExpr": CXX14,
    # Attributes as clang's AST holds them, where they are written (the
    # implicit loop hint of `#pragma clang loop` is not: AttributedStmt is).
    "AlwaysInlineAttr": Mlx(
        "steel/attn/kernels/steel_attention.h", 21,
        "METAL_FUNC static constexpr T apply(T x, T y) {",
    ),
    "AlignedAttr": Mlx(
        "steel/attn/loader.h", 42, "struct alignas(alignment * sizeof(T)) ReadVector {",
    ),
    # The strict pass's spelling of a member function declared for the
    # device, constant or threadgroup address space (strict_check.py).
    "EnableIfAttr": Mlx("complex.h", 141, "constexpr operator U() const device {"),
}

# Builtin types, as clang prints them in the pass's unit (`half` is
# _Float16 and `bfloat` is __fp16 there, strict/include/metal_strict/types.h).
# Anything else (`long long`, `double`, `long double`, `__int128`, `wchar_t`,
# `char16_t`, ...) is not a Metal type.
TYPES = {
    "void": SCALARS,
    "bool": SCALARS,
    "char": SCALARS,
    "unsigned char": SCALARS,
    "short": SCALARS,
    "unsigned short": SCALARS,
    "int": SCALARS,
    "unsigned int": SCALARS,
    "long": Mlx("steel/attn/kernels/steel_attention.h", 97, "ulong kv_head_idx"),
    "unsigned long": Mlx("steel/attn/kernels/steel_attention.h", 97, "ulong kv_head_idx"),
    "float": SCALARS,
    "_Float16": SCALARS,
    "__fp16": Mlx("bf16.h", 9, "typedef bfloat bfloat16_t;"),
}

# Attributes kernel code may write ([[...]] and __attribute__((...))), by
# where they may stand. The attributes of a kernel's parameters must come
# from ARGUMENT_INDEXES, ARGUMENT_BUILTINS and FUNCTION_CONSTANT.
FUNCTION_ATTRIBUTES = {
    "kernel": Mlx("fp_quantized.h", 1218, "[[kernel]] void fp_qmv_quad("),
    "host_name": Mlx("defines.h", 24, "template [[host_name("),
    "max_total_threads_per_threadgroup": Mlx(
        "steel/attn/kernels/steel_attention.h", 72,
        "max_total_threads_per_threadgroup(WM * WN * 32)",
    ),
    # METAL_FUNC is <metal_stdlib>'s `inline __attribute__((__always_inline__))`.
    "always_inline": Mlx(
        "steel/attn/kernels/steel_attention.h", 21, "METAL_FUNC static constexpr T apply",
    ),
}
# Kernel argument attributes that take an index, unique within a kernel for
# each attribute.
ARGUMENT_INDEXES = {
    "buffer": Mlx("steel/attn/kernels/steel_attention.h", 73, "const device T* Q [[buffer(0)]],"),
    "threadgroup": Mlx("sort.h", 159, "threadgroup ValT* tgp_vals [[threadgroup(0)]],"),
}
ARGUMENT_BUILTINS = {
    "thread_position_in_grid": Mlx(
        "fp_quantized.h", 2230, "uint2 tidx [[thread_position_in_grid]],",
    ),
    "threads_per_grid": Mlx("fp_quantized.h", 2231, "uint2 grid_dim [[threads_per_grid]],"),
    "threadgroup_position_in_grid": Mlx(
        "fp_quantized.h", 279, "uint3 tid [[threadgroup_position_in_grid]],",
    ),
    "thread_position_in_threadgroup": Mlx(
        "sort.h", 162, "uint3 lid [[thread_position_in_threadgroup]]) {",
    ),
    "thread_index_in_threadgroup": Mlx(
        "fp_quantized.h", 831, "uint lid [[thread_index_in_threadgroup]],",
    ),
    "threads_per_threadgroup": Mlx("sdpa_vector.h", 203, "uint3 tptg [[threads_per_threadgroup]],"),
    "simdgroup_index_in_threadgroup": Mlx(
        "fp_quantized.h", 349, "uint simd_gid [[simdgroup_index_in_threadgroup]],",
    ),
    "threadgroups_per_grid": Mlx("gemv.h", 804, "uint3 tgpg [[threadgroups_per_grid]],"),
    "simdgroups_per_threadgroup": Mlx(
        "reduction/reduce_all.h", 17, "uint simd_per_group [[simdgroups_per_threadgroup]],"
    ),
    "thread_index_in_simdgroup": Mlx(
        "fp_quantized.h", 350, "uint simd_lid [[thread_index_in_simdgroup]]) {",
    ),
}
# On a program-scope `constant` variable with an index (unique within the
# translation unit), and on a kernel argument with the name of such a
# variable, which then enables the argument.
FUNCTION_CONSTANT = {
    "function_constant": Mlx(
        "steel/attn/kernels/steel_attention.h", 14,
        "constant bool has_mask [[function_constant(300)]];",
    ),
}
# A kernel argument without an attribute, whose index Metal assigns.
ARGUMENT_WITHOUT_ATTRIBUTE = Mlx("softmax.h", 12, "const device T* in,")
FUNCTION_CONSTANT_ARGUMENT = Mlx(
    "steel/attn/kernels/steel_attention.h", 78, "[[buffer(5), function_constant(has_mask)]],")

# Address spaces beyond those of pointers and references.
ADDRESS_SPACES = {
    # A struct assigned in threadgroup memory: Metal declares the implicit
    # special members (copy and move, assignment and construction) for every
    # address space; stock clang only for the generic one, which is `thread`.
    "implicit special members": Mlx(
        "steel/gemm/loader.h", 77, "*((threadgroup ReadVector*)(&dst[i * dst_ld])) =",
    ),
}

# Declarations by scope. Each variable in kernel code must take one of the
# variable forms; parameters, fields and member functions are allowed as
# such (their types, address spaces and `virtual` are checked by the rules).
DECLARATIONS = {
    "variable template in constant": Mlx(
        "complex.h", 15, "static constexpr constant bool is_complex_v = false;",
    ),
    "program-scope variable in constant": Mlx(
        "steel/attn/kernels/steel_attention.h", 11,
        "constant bool align_Q [[function_constant(200)]];",
    ),
    # STEEL_CONST is `static constant constexpr const` (steel/defines.h:5).
    "static data member in constant": Mlx("steel/attn/mma.h", 48, "STEEL_CONST int kFragRows = 8;"),
    # The emulator spells a kernel's `threadgroup` array (FA_SHARED_ARRAY_DECL)
    # as a static in the threadgroup address space.
    "function-scope threadgroup array": Mlx(
        "steel/attn/kernels/steel_attention.h", 134, "threadgroup T Q_smem[q_tgp_mem_s];"),
    "local variable": Mlx(
        "steel/attn/kernels/steel_attention.h", 219, "const short sm = simd_coord.y;",
    ),
    "local constexpr variable": Mlx(
        "steel/attn/kernels/steel_attention.h", 120, "constexpr short padQ = 16 / sizeof(T);"),
    "parameter": Mlx(
        "steel/attn/kernels/steel_attention.h", 73, "const device T* Q [[buffer(0)]],",
    ),
    "field": Mlx("steel/attn/params.h", 13, "int B; ///< Batch Size"),
    "non-virtual member function": Mlx(
        "steel/attn/mma.h", 71, "METAL_FUNC static constexpr short2 get_coord(",
    ),
}

# Recursion (Metal 2.4 and later allow it in compute functions, with a call
# stack). A cycle through two or more functions is not in it.
RECURSION = {
    "a function that calls itself": Mlx("utils.h", 242, "next(extra, shape, strides);"),
}

# Language features past C++14 that kernel code may use (C++17 here; the
# pass compiles as C++17 so that it sees them at all). The checker detects
# if constexpr, init-statements in if and switch, inline variables, nested
# namespace definitions, static_assert without a message, `auto` template
# parameters, structured bindings, fold expressions, deduction guides,
# concepts and coroutines; all but these are findings.
LATER_FEATURES = {
    "if constexpr": Mlx(
        "steel/attn/kernels/steel_attention.h", 234, "if constexpr (!q_in_registers) {",
    ),
    "inline variable": Mlx(
        "utils.h", 80, "inline static constexpr constant complex_t<T> max = complex_t<T>(",
    ),
}


def citations():
    """(what, citation) for every entry of the vocabulary."""
    tables = {
        "node": NODES, "type": TYPES, "function attribute": FUNCTION_ATTRIBUTES,
        "argument index": ARGUMENT_INDEXES, "argument builtin": ARGUMENT_BUILTINS,
        "function constant": FUNCTION_CONSTANT, "declaration": DECLARATIONS,
        "feature": LATER_FEATURES, "recursion": RECURSION, "address space": ADDRESS_SPACES,
    }
    yield "function constant argument", FUNCTION_CONSTANT_ARGUMENT
    yield "argument without attribute", ARGUMENT_WITHOUT_ATTRIBUTE
    for table, entries in tables.items():
        for name, cite in entries.items():
            yield f"{table} {name}", cite
