"""Where abductune meets other tools' tuners: one module per tool (Inductor, Helion, Ray), each
the only module that imports that tool, each an optional extra that fails with one clear line
when the tool is missing. Nothing here is imported by `import abductune`."""
