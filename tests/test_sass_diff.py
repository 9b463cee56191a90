"""tools/sass_diff.py reads nvdisasm's listing as it prints it: a kernel is
found by its template arguments whatever its parameters, its instructions
compared with their addresses and without the spacing of the comments, the
listing's numbering of labels or the kernel's own name (a RET's target), and
a spill, a changed instruction or a kernel on one side only is reported.
On written listings, so without nvcc."""

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))
import sass_diff  # noqa: E402

# Two instances of one kernel template as the positional kernel mangles them,
# and as one taking a struct would.
KERNEL = "_ZN2fa16attention_kernelI6__halfLi64ELi64ENS_5TilesE"
POSITIONAL = KERNEL + "Lb0ELb1EEEvPKT_S6_S6_PS4_NS_10AttnParamsEi"
STRUCT = KERNEL + "Lb0ELb1EEEvNS_14AttnKernelArgsIT_EE"
OTHER = KERNEL + "Lb1ELb0EEEvPKT_S6_S6_PS4_NS_10AttnParamsEi"


def listing(functions):
    """A listing in nvdisasm's form of {mangled name: [instructions]}."""
    text = "\t.headerflags\t@\"EF_CUDA_SM90\"\n"
    for name, body in functions.items():
        text += f"\n//--------------------- .text.{name} --------------------------\n"
        text += f"\t.section\t.text.{name},\"ax\",@progbits\n"
        text += f"{name}:\n.text.{name}:\n"
        for i, instruction in enumerate(body):
            text += f"        /*{16 * i:04x}*/                   {instruction} ;\n"
    return text


BODY = ["LDC R1, c[0x0][0x28]", "S2R R0, SR_TID.X", "EXIT"]


def test_a_kernel_is_compared_with_its_former_self():
    before = sass_diff.functions(listing({POSITIONAL: BODY, OTHER: BODY}))
    after = sass_diff.functions(listing({STRUCT: BODY, OTHER: BODY}))
    addressed = [f"/*{16 * i:04x}*/ {b} ;" for i, b in enumerate(BODY)]
    assert before == {sass_diff.kernel_key(POSITIONAL): addressed,
                      sass_diff.kernel_key(OTHER): addressed}
    assert sass_diff.compare(before, after) == []


def test_the_spacing_of_comments_is_no_difference():
    spill = "STL [R1+0x38], R7"
    wide = sass_diff.functions(listing({POSITIONAL: [spill + " " * 80 + '(*"SpillRefill"*)']}))
    narrow = sass_diff.functions(listing({STRUCT: [spill + " " * 8 + '(*"SpillRefill"*)']}))
    assert sass_diff.compare(wide, narrow) == []


def test_labels_and_the_kernels_own_name_are_no_difference():
    # nvdisasm numbers labels across the file: OTHER's follow POSITIONAL's.
    def calls(name, first):
        return [f"@P0 BRA `(.L_x_{first})", f"BRA `(.L_x_{first + 1})",
                f"RET.REL.NODEC R2 `({name})", f"BRA `(.L_x_{first})"]
    before = sass_diff.functions(listing({POSITIONAL: calls(POSITIONAL, 0),
                                          OTHER: calls(OTHER, 2)}))
    after = sass_diff.functions(listing({STRUCT: calls(STRUCT, 0) + ["BRA `(.L_x_2)"],
                                         OTHER: calls(OTHER, 3)}))
    assert sass_diff.compare(before, after) == [
        f"differs: {sass_diff.kernel_key(POSITIONAL)}: 4 -> 5 instructions, 0 -> 0 local accesses"]


def test_parameter_offsets_differ_unless_free():
    moved = ["LDC R2, c[0x0][0x218]", "LDC R1, c[0x0][0x28]"]
    before = listing({POSITIONAL: ["LDC R2, c[0x0][0x210]", "LDC R1, c[0x0][0x28]"]})
    after = listing({STRUCT: moved})
    assert sass_diff.compare(sass_diff.functions(before), sass_diff.functions(after)) != []
    assert sass_diff.compare(sass_diff.functions(before, True),
                             sass_diff.functions(after, True)) == []
    driver = listing({STRUCT: ["LDC R2, c[0x0][0x210]", "LDC R1, c[0x0][0x20]"]})
    assert sass_diff.compare(sass_diff.functions(before, True),
                             sass_diff.functions(driver, True)) != []


def test_a_change_a_spill_and_a_lone_kernel_are_reported():
    before = sass_diff.functions(listing({POSITIONAL: BODY, OTHER: BODY}))
    spilled = BODY[:2] + ["STL [R1+0x38], R7", "LDL R7, [R1+0x38]"] + BODY[2:]
    after = sass_diff.functions(listing({STRUCT: spilled}))
    lines = sass_diff.compare(before, after)
    assert lines == [
        f"differs: {sass_diff.kernel_key(POSITIONAL)}: 3 -> 5 instructions, 0 -> 2 local accesses",
        f"only before: {sass_diff.kernel_key(OTHER)}",
    ]
    moved = sass_diff.functions(listing({STRUCT: [BODY[1], BODY[0], BODY[2]]}))
    assert sass_diff.compare(sass_diff.functions(listing({POSITIONAL: BODY})), moved) == [
        f"differs: {sass_diff.kernel_key(POSITIONAL)}: 3 -> 3 instructions, 0 -> 0 local accesses"]


def test_a_tiles_field_added_with_its_default_keeps_the_names():
    """AttnTilesOf's trailing false arguments are its defaults: a kernel
    named before a field was added is the kernel named after it with the
    field false, and not the one with it true."""
    tiles = "_ZN2fa16attention_kernelI6__halfLi64ELi64ENS_11AttnTilesOfILi64ELi128ELi4ELi1ELi2ELb1"
    before = tiles + "ELb0EEELb0ELb1EEEvPKT_"
    after = tiles + "ELb0ELb0EEELb0ELb1EEEvPKT_"
    other = tiles + "ELb0ELb1EEELb0ELb1EEEvPKT_"
    assert sass_diff.kernel_key(before) == sass_diff.kernel_key(after)
    assert sass_diff.kernel_key(before) != sass_diff.kernel_key(other)
