package loader
